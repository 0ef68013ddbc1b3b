package binfile

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// DWARFBudget bounds the DWARF bytes loaded (after decompression): per
// binary and for all binaries a Cache holds at once. Compressed sections
// are charged by the size their headers claim before anything is
// inflated, so a zlib bomb costs nothing but its check. Share one budget
// between Locators by pointer; the zero value uses the defaults.
type DWARFBudget struct {
	PerBinary int64 // 0: DefaultDWARFPerBinary
	Total     int64 // 0: DefaultDWARFTotal
	// Input, when set, is the size of the recording Total was sized for
	// (DWARFForInput): the refusal then says so.
	Input int64
	// Symbols, when positive, bounds the symbol tables read (symbol and
	// string sections, and SymbolOpenCost per binary) in all
	// (SymbolsForInput); 0 reads every one.
	Symbols int64

	symUsed int64
	own     *DWARFBudget // forFile's pool for DWARF inside the binaries themselves

	mu   sync.Mutex
	used int64
}

// Defaults for DWARFBudget. A large C++ program's DWARF is a few hundred
// MB; libc's 15 MB.
const (
	DefaultDWARFPerBinary = 1 << 30
	DefaultDWARFTotal     = 2 << 30
)

// DWARFPerInputByte is how many bytes of DWARF may be loaded per byte of
// the recording being analyzed (DWARFForInput): inflating and indexing
// DWARF costs about 12 ns a byte (ld.so's and libc's debug files here), so
// that is under half a microsecond of CPU per input byte, a quarter of
// what analysis may spend in all (2 s per MB). Past the budget, a system
// library's frames are named from its symbol table, without lines; the
// program's own DWARF is not bounded by the recording (forFile).
const DWARFPerInputByte = 32

// MinInputDWARF is the least DWARFForInput allows, whatever the
// recording's size: the C library's debug files (libc's 8.5 MB, ld.so's,
// libm's), so that a small recording is named as fully as a large one and
// as the same recording read from a pipe (whose size is not known, and
// which gets the default bounds). About 0.3 s of CPU at the most.
const MinInputDWARF = 24 << 20

// DWARFForInput is the DWARF budget for analyzing a recording of n bytes.
func DWARFForInput(n int64) int64 {
	if n <= 0 || n > DefaultDWARFTotal/DWARFPerInputByte {
		return DefaultDWARFTotal
	}
	return max(MinInputDWARF, n*DWARFPerInputByte)
}

// SymbolsPerInputByte is how many bytes of symbol tables and unwind tables
// may be read per byte of the recording being analyzed (SymbolsForInput),
// and SymbolOpenCost what opening a binary is charged besides: reading 512
// shared libraries' tables (16 MB in 245 files) cost about 25 ns a byte
// here, opening each one included, so that is under half a microsecond
// of CPU per input byte. A binary past the budget has its frames named
// by file and offset, or walked by frame pointers.
const (
	SymbolsPerInputByte = 16
	SymbolOpenCost      = 64 << 10
	MinInputSymbols     = 4 << 20 // libc's .symtab and a few more; about 0.1 s
)

// SymbolsForInput is the symbol-table budget for a recording of n bytes.
func SymbolsForInput(n int64) int64 {
	if n <= 0 || n > (1<<40)/SymbolsPerInputByte {
		return 0
	}
	return max(MinInputSymbols, n*SymbolsPerInputByte)
}

// BudgetError is a binary's debug info or tables left unread because the
// recording is too small for them (DWARFForInput, SymbolsForInput): what
// would have been read, Need bytes of it, past Limit for an Input-byte
// recording (PerByte bytes per byte of it), and what follows (Then).
type BudgetError struct {
	What               string
	Need, Limit, Input int64
	PerByte            int
	Then               string
}

func (e *BudgetError) Error() string {
	msg := fmt.Sprintf("its %s (%.1f MiB) would take what is read past %.1f MiB, the most for a %d-byte recording (%d bytes per byte of it, so that analysis time follows the recording's size)", e.What, float64(e.Need)/(1<<20), float64(e.Limit)/(1<<20), e.Input, e.PerByte)
	if e.Then != "" {
		msg += ": " + e.Then
	}
	return msg
}

// reserveSymbols charges a binary's symbol tables (n bytes, and
// SymbolOpenCost), or says why it cannot.
func (d *DWARFBudget) reserveSymbols(n int64) error {
	return d.reserveTables(n+SymbolOpenCost, "symbol table", "frames named by file and offset")
}

// reserveTables charges n bytes of a binary's tables (what) to Symbols,
// or says why it cannot and what follows (then).
func (d *DWARFBudget) reserveTables(n int64, what, then string) error {
	if d == nil || d.Symbols <= 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.symUsed+n > d.Symbols {
		return &BudgetError{What: what, Need: n, Limit: d.Symbols, Input: d.Input, PerByte: SymbolsPerInputByte, Then: then}
	}
	d.symUsed += n
	return nil
}

// symbolCost is what loadSymbols reads of files: the first symbol
// section found (.symtab, else .dynsym) with its string table.
func symbolCost(files ...*elfFile) int64 {
	for _, want := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		for _, f := range files {
			if f == nil {
				continue
			}
			s := f.ef.SectionByType(want)
			if s == nil || s.Type == elf.SHT_NOBITS || s.Size == 0 {
				continue
			}
			n := int64(min(s.Size, 1<<40))
			if int(s.Link) < len(f.ef.Sections) {
				n += int64(min(f.ef.Sections[s.Link].Size, 1<<40))
			}
			return n
		}
	}
	return 0
}

// maxInflateRatio bounds how much a compressed debug section may claim to
// expand. zlib shrinks real DWARF 3-6×; a bomb claims up to 1032×.
const maxInflateRatio = 100

func (d *DWARFBudget) perBinary() int64 {
	if d == nil || d.PerBinary <= 0 {
		return DefaultDWARFPerBinary
	}
	return d.PerBinary
}

// forFile is the budget a file's DWARF is charged to: a system library's
// separate debug file (from /usr/lib/debug, a build-id cache or
// debuginfod) to d, bounded by the recording's size when Input is set;
// the program's own DWARF (inside its binary, or in a debug file of its
// own: the code that names its sites) to a pool of d's with the default
// bounds, whatever the recording's size.
func (d *DWARFBudget) forFile(systemDebugFile bool) *DWARFBudget {
	if d == nil || systemDebugFile || d.Input == 0 {
		return d
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.own == nil {
		d.own = &DWARFBudget{PerBinary: d.PerBinary}
	}
	return d.own
}

// reserve charges n bytes against the total, or says why it cannot.
func (d *DWARFBudget) reserve(n int64) error {
	if d == nil {
		return nil
	}
	total := d.Total
	if total <= 0 {
		total = DefaultDWARFTotal
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.used+n > total {
		if d.Input > 0 {
			return &BudgetError{What: "DWARF", Need: n, Limit: total, Input: d.Input, PerByte: DWARFPerInputByte, Then: "frames named from the symbol table, without lines"}
		}
		return fmt.Errorf("its %d MiB of DWARF would take the DWARF of all binaries past %d MiB", n>>20, total>>20)
	}
	d.used += n
	return nil
}

// release returns what reserve charged.
func (d *DWARFBudget) release(n int64) {
	if d == nil || n == 0 {
		return
	}
	d.mu.Lock()
	d.used -= n
	d.mu.Unlock()
}

// sectionClaim is what loading one debug section costs and where its
// bytes lie in the file.
type sectionClaim struct {
	name       string
	size       int64 // bytes once loaded (decompressed)
	off, fsize uint64
	compressed bool
}

// dwarfCost checks the debug sections of f that want selects (all
// .debug_* and .zdebug_* sections when want is nil) before any is read:
// compressed sections may not claim more than maxInflateRatio times their
// stored size, nor share stored bytes with another section (six sections
// pointing at one zlib blob), and together they must fit perBinary. It
// returns the bytes loading them takes.
func dwarfCost(f *elf.File, want func(name string) bool, perBinary int64) (int64, error) {
	var claims []sectionClaim
	for _, s := range f.Sections {
		if !strings.HasPrefix(s.Name, ".debug_") && !strings.HasPrefix(s.Name, ".zdebug_") || s.Type == elf.SHT_NOBITS {
			continue
		}
		if want != nil && !want(s.Name) {
			continue
		}
		c := sectionClaim{name: s.Name, size: int64(s.Size), off: s.Offset, fsize: s.FileSize, compressed: s.Flags&elf.SHF_COMPRESSED != 0}
		if strings.HasPrefix(s.Name, ".zdebug_") {
			// Legacy GNU compression: "ZLIB" and the big-endian size.
			var h [12]byte
			if _, err := s.ReadAt(h[:], 0); err == nil && string(h[:4]) == "ZLIB" {
				c.size, c.compressed = int64(min(binary.BigEndian.Uint64(h[4:]), 1<<62)), true
			}
		}
		if c.size < 0 || c.compressed && uint64(c.size) > maxInflateRatio*c.fsize+4096 {
			return 0, fmt.Errorf("%s claims %d bytes from %d compressed (%d×; real DWARF compresses about 5×): corrupt or crafted", s.Name, s.Size, c.fsize, uint64(c.size)/max(c.fsize, 1))
		}
		claims = append(claims, c)
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].off < claims[j].off })
	var total int64
	for i, c := range claims {
		if i > 0 {
			if p := claims[i-1]; (p.compressed || c.compressed) && p.fsize > 0 && c.off < p.off+p.fsize {
				return 0, fmt.Errorf("%s and %s share bytes in the file (at 0x%x): corrupt or crafted", p.name, c.name, c.off)
			}
		}
		total += c.size
		if total > perBinary {
			return 0, fmt.Errorf("its debug sections need more than %d MiB, the most faultline loads for one binary", perBinary>>20)
		}
	}
	return total, nil
}
