package cfi

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// cacheSize is the number of rows the Table remembers: 2-way set
// associative by a hash of the PC, so two hot PCs that hash alike do not
// evict each other. A row is ~600 bytes; the cache is allocated on the
// first Find.
const cacheSize = 256

type cacheEntry struct {
	valid bool
	row   Row
}

// indexEntry locates one FDE found by scanning a section.
type indexEntry struct {
	begin, end uint64
	off        uint32 // FDE offset in its section
	sec        uint8  // index into Table.secs
}

// Table is the call frame information of one ELF binary (with, optionally,
// its separate debug file), keyed by ELF virtual addresses. Find is safe for
// concurrent use; a mutex guards the row cache.
type Table struct {
	secs []*section

	// .eh_frame_hdr binary search table, used for .eh_frame when present
	// and well-formed: hdrN entries of (initial_loc, fde) as sdata4 relative
	// to hdrAddr, starting at hdrTable in hdr.
	hdr      []byte
	hdrAddr  uint64
	hdrTable int
	hdrN     int
	hdrSec   int // index of .eh_frame in secs
	order    binary.ByteOrder

	// eh holds the scanned .eh_frame FDEs when there is no usable
	// .eh_frame_hdr; dbg holds the .debug_frame FDEs. Both sorted by begin.
	eh  []indexEntry
	dbg []indexEntry

	entry uint64

	mu      sync.Mutex
	cache   *[cacheSize]cacheEntry
	mru     [cacheSize / 2]uint8 // most recently used way of each set
	initial rowState
	stack   []rowState
}

// Sections is raw CFI for New: what Load extracts from ELF files. Tests and
// fuzzers build it by hand.
type Sections struct {
	EhFrame        []byte
	EhFrameAddr    uint64 // virtual address of .eh_frame (for pcrel pointers)
	EhFrameHdr     []byte // optional
	EhFrameHdrAddr uint64
	// DebugFrame holds .debug_frame contents: the binary's and/or its
	// separate debug file's (they use absolute addresses).
	DebugFrame [][]byte
	TextAddr   uint64 // base for DW_EH_PE_textrel
	DataAddr   uint64 // base for DW_EH_PE_datarel in .eh_frame (.got)
	// Entry is the ELF entry point (e_entry), 0 if none; see Table.Entry.
	Entry     uint64
	ByteOrder binary.ByteOrder // default little-endian
	AddrSize  int              // default 8
}

// Load reads the CFI of exe and, when debug is not nil, of its separate
// debug file (only .debug_frame is taken from it: its .eh_frame is NOBITS).
// Lookups search .eh_frame first (through .eh_frame_hdr when present), then
// .debug_frame. It returns ErrNoCFI when there is neither. Panics in
// debug/elf on hostile files are returned as errors. The Table keeps copies
// of the sections it needs, not the *elf.File: exe and debug may be closed
// after Load.
func Load(exe, debug *elf.File) (*Table, error) {
	s, err := elfSections(exe, debug)
	if err != nil {
		return nil, err
	}
	return New(s)
}

// maxFrameSection caps an unwind section's (decompressed) size.
const maxFrameSection = 1 << 30

// maxInflateRatio bounds what a compressed section may claim to expand to:
// zlib shrinks frame tables a few times, a bomb claims up to 1032×.
const maxInflateRatio = 100

// elfSections extracts what New needs from ELF files, turning debug/elf
// panics on hostile input into errors.
func elfSections(exe, debug *elf.File) (s Sections, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = Sections{}, fmt.Errorf("cfi: reading ELF sections: %v", r)
		}
	}()
	if exe == nil {
		return s, errors.New("cfi: nil ELF file")
	}
	s.ByteOrder = exe.ByteOrder
	s.AddrSize = 8
	if exe.Class == elf.ELFCLASS32 {
		s.AddrSize = 4
	}
	read := func(f *elf.File, name string) ([]byte, uint64, error) {
		sec := f.Section(name)
		if sec == nil || sec.Type == elf.SHT_NOBITS {
			return nil, 0, nil
		}
		if sec.Size > maxFrameSection {
			// A compressed section's size is its header's claim: a zlib
			// bomb would inflate to it.
			return nil, 0, fmt.Errorf("cfi: %s claims %d bytes, more than the %d MiB faultline loads", name, sec.Size, maxFrameSection>>20)
		}
		if sec.Flags&elf.SHF_COMPRESSED != 0 && sec.Size > maxInflateRatio*sec.FileSize+4096 {
			return nil, 0, fmt.Errorf("cfi: %s claims %d bytes from %d compressed: corrupt or crafted (a zlib bomb)", name, sec.Size, sec.FileSize)
		}
		d, err := sec.Data()
		if err != nil {
			return nil, 0, fmt.Errorf("cfi: reading %s: %w", name, err)
		}
		return d, sec.Addr, nil
	}
	if s.EhFrame, s.EhFrameAddr, err = read(exe, ".eh_frame"); err != nil {
		return s, err
	}
	if s.EhFrameHdr, s.EhFrameHdrAddr, err = read(exe, ".eh_frame_hdr"); err != nil {
		return s, err
	}
	for _, f := range []*elf.File{exe, debug} {
		if f == nil {
			continue
		}
		d, _, err := read(f, ".debug_frame")
		if err != nil {
			return s, err
		}
		if d != nil {
			s.DebugFrame = append(s.DebugFrame, d)
		}
	}
	s.Entry = exe.Entry
	if sec := exe.Section(".text"); sec != nil {
		s.TextAddr = sec.Addr
	}
	if sec := exe.Section(".got"); sec != nil {
		s.DataAddr = sec.Addr
	}
	return s, nil
}

// New builds a Table from raw sections. A malformed .eh_frame_hdr is
// ignored (the FDEs are indexed by scanning instead); an entry that cannot be
// parsed while scanning ends the scan of its section with everything before
// it indexed, and the error is returned only when nothing at all was found.
func New(s Sections) (*Table, error) {
	if s.ByteOrder == nil {
		s.ByteOrder = binary.LittleEndian
	}
	if s.AddrSize == 0 {
		s.AddrSize = 8
	}
	if len(s.EhFrame) == 0 && len(s.DebugFrame) == 0 {
		return nil, ErrNoCFI
	}
	t := &Table{order: s.ByteOrder, hdrSec: -1, entry: s.Entry}
	var firstErr error
	if len(s.EhFrame) > 0 {
		t.secs = append(t.secs, &section{name: ".eh_frame", data: s.EhFrame, addr: s.EhFrameAddr, eh: true,
			order: s.ByteOrder, addrSize: s.AddrSize, textAddr: s.TextAddr, dataAddr: s.DataAddr})
		if !t.useHdr(s) {
			var err error
			t.eh, err = t.scan(0, t.eh)
			if err != nil {
				firstErr = err
			}
		}
	}
	for i, d := range s.DebugFrame {
		if len(d) == 0 || len(t.secs) >= 255 {
			continue
		}
		name := ".debug_frame"
		if i > 0 {
			name = ".debug_frame (debug file)"
		}
		t.secs = append(t.secs, &section{name: name, data: d, order: s.ByteOrder, addrSize: s.AddrSize})
		var err error
		t.dbg, err = t.scan(len(t.secs)-1, t.dbg)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	sortIndex(t.eh)
	sortIndex(t.dbg)
	if t.hdrN == 0 && len(t.eh) == 0 && len(t.dbg) == 0 && firstErr != nil {
		return nil, firstErr
	}
	return t, nil
}

func sortIndex(x []indexEntry) {
	sort.Slice(x, func(i, j int) bool { return x[i].begin < x[j].begin })
}

// useHdr validates .eh_frame_hdr and adopts its search table. Only the
// encoding every toolchain emits (DW_EH_PE_datarel|DW_EH_PE_sdata4) is used
// for the table; anything else falls back to scanning.
func (t *Table) useHdr(s Sections) bool {
	h := s.EhFrameHdr
	if len(h) < 4 || h[0] != 1 {
		return false
	}
	sec := &section{name: ".eh_frame_hdr", data: h, addr: s.EhFrameHdrAddr, order: s.ByteOrder,
		addrSize: s.AddrSize, textAddr: s.TextAddr, dataAddr: s.EhFrameHdrAddr}
	b := buf{sec: sec, off: 4, end: len(h)}
	ehPtr, ind1 := b.encoded(h[1])
	count, ind2 := b.encoded(h[2])
	if b.err != nil || ind1 || ind2 || h[3] != dwEHPEDatarel|dwEHPESdata4 || h[1] == dwEHPEOmit || h[2] == dwEHPEOmit {
		return false
	}
	if ehPtr != s.EhFrameAddr || count == 0 || count > uint64(len(h)-b.off)/8 {
		return false
	}
	t.hdr, t.hdrAddr, t.hdrTable, t.hdrN, t.hdrSec = h, s.EhFrameHdrAddr, b.off, int(count), 0
	return true
}

func (t *Table) hdrEntry(i int) (loc, fdeAddr uint64) {
	p := t.hdrTable + 8*i
	loc = t.hdrAddr + uint64(int64(int32(t.order.Uint32(t.hdr[p:]))))
	fdeAddr = t.hdrAddr + uint64(int64(int32(t.order.Uint32(t.hdr[p+4:]))))
	return
}

// scan walks every entry of section si and appends its FDEs to idx.
func (t *Table) scan(si int, idx []indexEntry) ([]indexEntry, error) {
	s := t.secs[si]
	var lastCIE cie
	haveCIE := false
	for off := 0; off < len(s.data); {
		h, err := readEntryHeader(s, off)
		if err != nil {
			return idx, err
		}
		if h.zero {
			if s.eh {
				break // .eh_frame's terminator
			}
			off = h.end
			continue
		}
		if !s.isCIE(h) && off <= 0xffffffff {
			cieOff, ok := s.cieOffset(h)
			if !ok {
				return idx, &FormatError{Section: s.name, Offset: int64(h.idPos), Msg: "CIE pointer out of range"}
			}
			if !haveCIE || lastCIE.off != cieOff {
				lastCIE, err = parseCIE(s, cieOff)
				if err != nil {
					return idx, err
				}
				haveCIE = true
			}
			b := buf{sec: s, off: h.idPos + 4, end: h.end}
			if h.dwarf64 && !s.eh {
				b.off = h.idPos + 8
			}
			f, err := finishFDE(&b, fde{off: off, cie: lastCIE})
			if err != nil {
				return idx, err
			}
			if f.end > f.begin {
				idx = append(idx, indexEntry{begin: f.begin, end: f.end, off: uint32(off), sec: uint8(si)})
			}
		}
		off = h.end
	}
	return idx, nil
}

// findFDE returns the FDE covering pc.
func (t *Table) findFDE(pc uint64) (*section, fde, error) {
	if t.hdrN > 0 {
		i := sort.Search(t.hdrN, func(i int) bool {
			loc, _ := t.hdrEntry(i)
			return loc > pc
		}) - 1
		if i >= 0 {
			_, fdeAddr := t.hdrEntry(i)
			s := t.secs[t.hdrSec]
			if fdeAddr >= s.addr && fdeAddr-s.addr < uint64(len(s.data)) {
				f, err := parseFDE(s, int(fdeAddr-s.addr))
				if err != nil {
					return nil, f, err
				}
				if f.begin <= pc && pc < f.end {
					return s, f, nil
				}
			}
		}
	}
	for _, idx := range [2][]indexEntry{t.eh, t.dbg} {
		i := sort.Search(len(idx), func(i int) bool { return idx[i].begin > pc }) - 1
		// Walk back over FDEs that start at or before pc: nested or
		// overlapping FDEs are rare but legal.
		for j := i; j >= 0 && j > i-4; j-- {
			e := &idx[j]
			if pc < e.end {
				s := t.secs[e.sec]
				f, err := parseFDE(s, int(e.off))
				return s, f, err
			}
		}
	}
	return nil, fde{}, ErrNoFDE
}

// Find fills row with the unwind rules in force at pc, an ELF virtual
// address (runtime PC minus load bias; for a caller frame, the return
// address minus one). It returns ErrNoFDE when no FDE covers pc, a
// *FormatError for malformed CFI. A cached row is copied without
// allocating; a miss interprets the FDE's instructions up to pc and caches
// the row for its whole PC range.
func (t *Table) Find(pc uint64, row *Row) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cache == nil {
		t.cache = new([cacheSize]cacheEntry)
	}
	set := int((pc*0x9E3779B97F4A7C15)>>(64-7)) * 2 // 128 sets of 2
	for w := 0; w < 2; w++ {
		if e := &t.cache[set+w]; e.valid && e.row.Start <= pc && pc < e.row.End {
			t.mru[set/2] = uint8(w)
			*row = e.row
			return nil
		}
	}
	victim := set + 1 - int(t.mru[set/2])
	t.mru[set/2] = uint8(victim - set)
	e := &t.cache[victim]
	s, f, err := t.findFDE(pc)
	if err != nil {
		return err
	}
	e.valid = false
	if err := interpret(s, f, pc, &e.row, &t.initial, &t.stack); err != nil {
		return err
	}
	e.valid = true
	*row = e.row
	return nil
}

// Entry returns the ELF entry point of the binary (0 if unknown). The
// dynamic loader's _start/_dl_start_user (glibc sysdeps/x86_64/dl-machine.h
// RTLD_START) has no CFI at all, so an unwinder that finds no FDE just
// after the entry point has reached the first frame of the process.
func (t *Table) Entry() uint64 { return t.entry }

// NumFDEs returns how many FDEs the table indexes (for diagnostics).
func (t *Table) NumFDEs() int { return t.hdrN + len(t.eh) + len(t.dbg) }

// FDERange is the PC range of one FDE, for tests and tools that walk every
// row.
type FDERange struct {
	Begin, End uint64
	Section    string
	Offset     uint64
}

// FDEs returns the PC ranges of all indexed FDEs (allocates; not for the
// hot path).
func (t *Table) FDEs() []FDERange {
	var out []FDERange
	for i := 0; i < t.hdrN; i++ {
		_, fdeAddr := t.hdrEntry(i)
		s := t.secs[t.hdrSec]
		if fdeAddr < s.addr || fdeAddr-s.addr >= uint64(len(s.data)) {
			continue
		}
		f, err := parseFDE(s, int(fdeAddr-s.addr))
		if err != nil {
			continue
		}
		out = append(out, FDERange{f.begin, f.end, s.name, uint64(f.off)})
	}
	for _, idx := range [2][]indexEntry{t.eh, t.dbg} {
		for _, e := range idx {
			out = append(out, FDERange{e.begin, e.end, t.secs[e.sec].name, uint64(e.off)})
		}
	}
	return out
}
