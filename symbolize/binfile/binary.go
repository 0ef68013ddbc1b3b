package binfile

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	kzlib "github.com/klauspost/compress/zlib"

	"github.com/faultline/faultline/perfdata/schema"
)

// Unknown is the function name of a frame nothing could name, as perf prints it.
const Unknown = "[unknown]"

// Frame is one source-level frame at an address. Symbolize returns the
// inline chain innermost first: every frame but the last has Inlined set
// and was inlined into the frame after it.
type Frame struct {
	Func      string // demangled name (DWARF, else the ELF symbol), or Unknown
	System    string // the name as stored: the mangled linkage name when there is one
	File      string // source file from the line table; "" if unknown
	Line      int    // 0 if unknown
	Inlined   bool   // an inlined call, not a real (physical) frame
	Symbol    string // the ELF symbol containing the address (perf's name for the physical frame), demangled; "" if none
	SymOffset uint64 // address - start of Symbol (or of the DWARF function when there is no symbol), for "sym+0x12"
}

// Binary is one opened and indexed binary with its debug file. Its methods
// are safe for concurrent use.
type Binary struct {
	// Path is the recorded mapping name.
	Path string
	// File is the binary that was opened ("" if only a debug file was found).
	File string
	// DebugFile is the file DWARF is read from: File itself when it carries
	// DWARF, a separate debug file, or "".
	DebugFile string
	// BuildID is the build ID of the opened binary (or of the debug file),
	// lowercase hex; "" if it has none.
	BuildID string
	// Warnings are problems that did not stop the open: build-ID mismatches,
	// missing debug info (a *NoDebugInfoError), unreadable DWARF.
	Warnings []error

	bin, dbg *elfFile
	loads    []*elf.Prog

	// syms is loaded once, in the background from open on or by the
	// first caller that needs it (symbols).
	syms     symtab
	symsOnce sync.Once
	loadSyms func()

	mu      sync.Mutex // guards dw's lazy parts and buf
	dw      *dwarfIndex
	buf     []int32
	prefill sync.WaitGroup // the background reading of dw's sections

	budget    *DWARFBudget // where dwarfCost is reserved, released by Close
	dwarfCost int64
	tables    *DWARFBudget // where the symbol and unwind tables are charged
}

// ReserveUnwindTables charges the binary's unwind tables (.eh_frame,
// .eh_frame_hdr, .debug_frame) against the budget of tables read, before
// they are read; an error says the recording is too small for them.
func (b *Binary) ReserveUnwindTables() error {
	var n int64
	files := []*elfFile{b.bin}
	if b.dbg != b.bin {
		files = append(files, b.dbg)
	}
	for _, f := range files {
		if f == nil {
			continue
		}
		for _, name := range []string{".eh_frame", ".eh_frame_hdr", ".debug_frame"} {
			if s := f.ef.Section(name); s != nil && s.Type != elf.SHT_NOBITS {
				n += int64(min(s.Size, 1<<40))
			}
		}
	}
	return b.tables.reserveTables(n, "unwind tables", "")
}

// newBinary indexes an opened binary and/or debug file.
//
// What only naming needs is read in the background, so that opening a
// binary for unwinding (program headers, CFI) does not wait for it: the
// symbol table, and the DWARF sections of a lazily indexed debug file
// (lazydwarf.go; the units themselves are read when asked about).
// Symbolize waits for them. DWARF that cannot be indexed at all is found
// out here, so Warnings are complete when newBinary returns.
func newBinary(recPath, recBuildID string, bin, dbg *elfFile, warns []error, budget *DWARFBudget) (*Binary, error) {
	b := &Binary{Path: recPath, bin: bin, dbg: dbg, Warnings: warns, tables: budget}
	main := bin
	if main == nil {
		main = dbg
	}
	if bin != nil {
		b.File = bin.path
	}
	b.BuildID = main.buildID
	for _, p := range main.ef.Progs {
		if p.Type == elf.PT_LOAD {
			b.loads = append(b.loads, p)
		}
	}
	b.loadSyms = func() {
		defer func() {
			if recover() != nil { // readSyms and synthesizePLT recover their own
				b.syms = symtab{}
			}
		}()
		if dbg != nil && dbg != bin {
			b.syms = loadSymbols(bin, dbg, bin)
		} else {
			b.syms = loadSymbols(bin, bin)
		}
	}
	if err := budget.reserveSymbols(symbolCost(bin, dbg)); err != nil {
		b.Warnings = append(b.Warnings, fmt.Errorf("%s: symbols not read: %w", main.path, err))
		b.loadSyms = func() {}
	} else {
		background.add(func() { b.symsOnce.Do(b.loadSyms) })
	}
	if dbg != nil && dbg.hasDWARF() {
		budget := budget.forFile(dbg != bin && schema.IsSystemFile(recPath))
		x, cost, err := openDWARF(dbg, budget)
		if err != nil {
			b.Warnings = append(b.Warnings, fmt.Errorf("%s: unusable DWARF, naming frames from ELF symbols only: %w", dbg.path, err))
		} else {
			b.dw, b.DebugFile = x, dbg.path
			b.budget, b.dwarfCost = budget, cost
			if x.lazy != nil {
				// Which units a run asks for is known only at its end, and
				// libc's are spread over all of .debug_info: inflate the
				// sections now, while the recording is being decoded.
				x.lazy.prefill(&b.prefill)
			}
		}
	}
	return b, nil
}

// dwarfData loads the DWARF sections symbolization needs, with panics
// turned into errors, for indexing every unit (openDWARF's way when the
// lazy index cannot be had). It leaves out what it never reads (location
// lists, .debug_frame, aranges, pubnames, type units): decompressing them
// was a fifth of the time to open libc. Relocatable files and legacy .zdebug
// compression go through elf.File.DWARF.
//
// Before anything is read, dwarfCost checks what the sections claim
// against budget's per-binary bound, and the total is reserved in budget
// (returned as cost: release it when the data is dropped).
func dwarfData(f *elfFile, budget *DWARFBudget) (d *dwarf.Data, line []byte, cost int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			d, line, err = nil, nil, &FormatError{Path: f.path, Msg: "loading DWARF", Err: fmt.Errorf("debug/dwarf panicked: %v", p)}
		}
		if err != nil {
			budget.release(cost)
			cost = 0
		}
	}()
	legacy := f.ef.Type == elf.ET_REL || f.ef.Section(".zdebug_info") != nil
	var want func(string) bool // legacy: elf.File.DWARF reads every debug section
	if !legacy {
		want = func(name string) bool { return dwarfSections[strings.TrimPrefix(name, ".debug_")] }
	}
	n, err := dwarfCost(f.ef, want, budget.perBinary())
	if err == nil {
		err = budget.reserve(n)
	}
	if err != nil {
		return nil, nil, 0, &FormatError{Path: f.path, Msg: "loading DWARF", Err: err}
	}
	cost = n
	if legacy {
		// No raw .debug_line here (relocated or legacy-compressed): the
		// line headers go unchecked (see checkLineHeader).
		d, err = f.ef.DWARF()
		return d, nil, cost, err
	}
	// Compressed sections (Debian's debug files) inflate in parallel: zlib
	// was most of the cost of opening libc's.
	var names []string
	for name := range dwarfSections {
		names = append(names, name)
	}
	slices.Sort(names) // the first error in name order, whatever the map's
	datas := make([][]byte, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		s := f.ef.Section(".debug_" + name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("debug/elf panicked: %v", p)
				}
			}()
			datas[i], errs[i] = inflateSection(f, s)
		}()
	}
	wg.Wait()
	sect := map[string][]byte{}
	for i, name := range names {
		if errs[i] != nil {
			return nil, nil, cost, &FormatError{Path: f.path, Msg: "reading .debug_" + name, Err: errs[i]}
		}
		if datas[i] != nil {
			sect[name] = datas[i]
		}
	}
	d, err = dwarf.New(sect["abbrev"], nil, nil, sect["info"], sect["line"], nil, sect["ranges"], sect["str"])
	if err != nil {
		return nil, nil, cost, &FormatError{Path: f.path, Msg: "parsing DWARF", Err: err}
	}
	for _, name := range []string{"addr", "line_str", "str_offsets", "rnglists"} {
		if data := sect[name]; data != nil {
			if err := d.AddSection(".debug_"+name, data); err != nil {
				return nil, nil, cost, &FormatError{Path: f.path, Msg: "parsing .debug_" + name, Err: err}
			}
		}
	}
	return d, sect["line"], cost, nil
}

// chdr64Size is sizeof(Elf64_Chdr): ch_type, ch_reserved, ch_size,
// ch_addralign (elf.h).
const chdr64Size = 24

// inflateSection is s.Data(), but inflates a zlib-compressed section
// (SHF_COMPRESSED, ELFCOMPRESS_ZLIB: Debian's debug files) with
// klauspost/compress, about a third faster than compress/zlib, which
// debug/elf uses: inflating .debug_info was most of opening libc's debug
// file. Anything else goes to s.Data(). The caller has reserved s.Size
// (dwarfCost) before.
func inflateSection(f *elfFile, s *elf.Section) ([]byte, error) {
	zr, err := zlibSection(f, s)
	if err != nil {
		return nil, err
	}
	if zr == nil {
		return s.Data()
	}
	out := make([]byte, s.Size)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, err
	}
	return out, nil
}

// zlibSection returns a reader of s inflated with klauspost/compress when
// s is a zlib-compressed section of an ELF64 file opened here; nil (and
// no error) for any other section, which debug/elf reads.
func zlibSection(f *elfFile, s *elf.Section) (io.Reader, error) {
	if s.Flags&elf.SHF_COMPRESSED == 0 || f.f == nil || f.ef.Class != elf.ELFCLASS64 || s.FileSize < chdr64Size || s.FileSize > s.Size {
		return nil, nil
	}
	raw := make([]byte, s.FileSize)
	if _, err := f.f.ReadAt(raw, int64(s.Offset)); err != nil {
		return nil, err
	}
	bo := f.ef.ByteOrder
	if elf.CompressionType(bo.Uint32(raw)) != elf.COMPRESS_ZLIB || bo.Uint64(raw[8:]) != s.Size {
		return nil, nil
	}
	return kzlib.NewReader(bytes.NewReader(raw[chdr64Size:]))
}

// dwarfSections are the DWARF sections symbolization reads.
var dwarfSections = map[string]bool{"abbrev": true, "info": true, "line": true, "ranges": true, "str": true,
	"addr": true, "line_str": true, "str_offsets": true, "rnglists": true}

// ELF returns the binary's ELF file (for .eh_frame, .text, program
// headers), or nil when only a debug file was found. Owned by the Binary.
func (b *Binary) ELF() *elf.File {
	if b.bin == nil {
		return nil
	}
	return b.bin.ef
}

// DebugELF returns the ELF file DWARF comes from (for .debug_frame): the
// separate debug file, or the binary itself when it carries DWARF, or nil.
// In a separate debug file, code sections such as .text are SHT_NOBITS.
func (b *Binary) DebugELF() *elf.File {
	if b.dbg == nil {
		return nil
	}
	return b.dbg.ef
}

// symbols returns the symbol table once it is loaded.
func (b *Binary) symbols() *symtab {
	b.symsOnce.Do(b.loadSyms)
	return &b.syms
}

// settle loads the symbol table if the background has not yet, and waits
// for the background reading of the debug sections.
func (b *Binary) settle() {
	b.symbols()
	b.prefill.Wait()
}

// hasDWARF reports whether frames get inline chains and file:line.
func (b *Binary) hasDWARF() bool { return b.dw != nil }

// Close closes the files the Binary opened.
func (b *Binary) Close() error {
	b.symsOnce.Do(func() {}) // not loaded by now: never; loading: wait (it reads the files)
	b.mu.Lock()
	if b.dw != nil && b.dw.lazy != nil {
		b.dw.lazy.stop.Store(true)
	}
	b.mu.Unlock()
	b.prefill.Wait()
	b.budget.release(b.dwarfCost)
	b.dwarfCost = 0
	var err error
	if b.bin != nil && b.bin.f != nil {
		err = b.bin.f.Close()
	}
	if b.dbg != nil && b.dbg != b.bin && b.dbg.f != nil {
		if e := b.dbg.f.Close(); err == nil {
			err = e
		}
	}
	return err
}

// offsetToVaddr converts a file offset in the binary (for a sample in an
// MMAP2 mapping: pgoff + pc - start) to an ELF virtual address, using the
// PT_LOAD program headers (p_offset ↦ p_vaddr). Offsets in the page before
// a segment's p_offset (mapped because mappings are page-aligned) convert
// too.
func (b *Binary) offsetToVaddr(off uint64) (uint64, bool) {
	for _, p := range b.loads {
		if p.Off <= off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	for _, p := range b.loads {
		if p.Off&^0xfff <= off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}

// vaddrToOffset converts an ELF virtual address to its file offset.
func (b *Binary) vaddrToOffset(vaddr uint64) (uint64, bool) {
	for _, p := range b.loads {
		if p.Vaddr <= vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}

// MappedVaddr converts a pc inside a mapping that starts at start and maps
// the file from pgoff to an ELF virtual address, by the PT_LOAD program
// headers (p_offset ↦ p_vaddr); false when no segment holds it.
func (b *Binary) MappedVaddr(pc, start, pgoff uint64) (uint64, bool) {
	if pc < start {
		return 0, false
	}
	return b.offsetToVaddr(pgoff + (pc - start))
}

// Symbolize appends to out the frames at vaddr, innermost first, and
// returns the extended slice. There is always at least one frame; one that
// nothing names has Func Unknown. Callers should cache the result per
// address: the slices are fresh but the strings are shared.
func (b *Binary) Symbolize(vaddr uint64, out []Frame) []Frame {
	syms := b.symbols()
	b.mu.Lock()
	defer b.mu.Unlock()

	var symName, symRaw, symFile string
	var symOff uint64
	hasSym := false
	if s := syms.lookup(vaddr); s != nil {
		hasSym = true
		symName, symRaw, symFile, symOff = s.demangledName(), s.name, s.file, vaddr-s.start
	}
	if b.dw != nil {
		if cu := b.dw.unitFor(vaddr); cu != nil {
			file, line := cu.line(vaddr)
			b.buf = cu.chain(vaddr, b.buf[:0])
			if len(b.buf) > 0 {
				if !hasSym {
					symOff = vaddr - cu.nodes[b.buf[0]].entry
				}
				for i := len(b.buf) - 1; i >= 0; i-- {
					n := &cu.nodes[b.buf[i]]
					cu.resolve(n)
					f := Frame{Func: n.name, System: n.linkage, File: file, Line: line,
						Inlined: i > 0, Symbol: symName, SymOffset: symOff}
					if f.Func == "" {
						f.Func, f.System = Unknown, ""
						if i == 0 && hasSym {
							f.Func, f.System = symName, symRaw
						}
					}
					out = append(out, f)
					file, line = n.callFile, int(n.callLine)
				}
				return out
			}
			if file != "" || hasSym {
				// Code without a DWARF function (assembly): like addr2line,
				// name it from the symbol table and place it by the line table.
				f := Frame{Func: Unknown, File: file, Line: line, Symbol: symName, SymOffset: symOff}
				if hasSym {
					f.Func, f.System = symName, symRaw
					if file == "" {
						f.File = symFile
					}
				}
				return append(out, f)
			}
		}
	}
	if hasSym {
		return append(out, Frame{Func: symName, System: symRaw, File: symFile, Symbol: symName, SymOffset: symOff})
	}
	return append(out, Frame{Func: Unknown})
}
