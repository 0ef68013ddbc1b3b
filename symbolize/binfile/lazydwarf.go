package binfile

import (
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Opening a binary does not inflate all of its DWARF or parse every
// compile unit (libc's debug file has thousands), since a recording's
// samples hit a few dozen units. When the debug file has
// .debug_aranges, the index is built from it alone, and a unit is read
// only when an address inside it is first asked about, from a
// debug/dwarf.Data holding just that unit. The sections are inflated in
// the background from open on, each on its own (zlib streams are
// sequential, but independent of each other); a unit waits only for the
// bytes it needs: .debug_info up to its end, the other sections whole.
//
// The result is the same as indexing every unit by its own ranges
// (newDWARFIndex), which is what happens without .debug_aranges, or when
// the unit read disagrees with what .debug_aranges said about it, or when
// its abbreviations allow references outside the unit
// (DW_FORM_ref_addr and kin: dwz, LTO), which a one-unit Data cannot
// follow.

// lazySection is a debug section read (inflated, when compressed) on
// demand: data has the section's full size, data[:n] has been read.
type lazySection struct {
	name string
	size int // bytes once read (decompressed)
	f    *elfFile
	sec  *elf.Section

	mu      sync.Mutex // guards the rest: the background and a reader share s
	started bool
	data    []byte // size bytes, of which data[:n] are read
	n       int
	r       io.Reader // the rest of the section; nil once all is read
	err     error     // the first error, sticky
}

// lazyChunk is the least a lazySection reads at once.
const lazyChunk = 256 << 10

// newLazySection prepares s of f for reading on demand; nothing is read
// or allocated until the first ensure. The caller has reserved s.Size
// (dwarfCost).
func newLazySection(f *elfFile, s *elf.Section) *lazySection {
	return &lazySection{name: s.Name, size: int(s.Size), f: f, sec: s}
}

// ensure reads the section up to byte end (capped at its size). Bytes
// before end are not written again: a caller may read them without s.mu.
func (s *lazySection) ensure(end int) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		if p := recover(); p != nil { // the inflater, on a hostile stream
			s.err = fmt.Errorf("reading %s at %#x: inflating panicked: %v", s.name, s.n, p)
			err = s.err
		}
	}()
	if !s.started {
		s.started = true
		if err := s.start(); err != nil {
			s.err = fmt.Errorf("reading %s: %w", s.name, err)
		}
	}
	end = min(end, len(s.data))
	for s.n < end && s.err == nil {
		want := min(len(s.data), max(end, s.n+lazyChunk))
		k, err := io.ReadFull(s.r, s.data[s.n:want])
		s.n += k
		if err != nil {
			s.err = fmt.Errorf("reading %s at %#x: %w", s.name, s.n, err)
		}
	}
	if s.n == len(s.data) {
		s.r = nil // drop the compressed bytes and the inflater
	}
	if s.n < end || s.err != nil && len(s.data) == 0 {
		return s.err
	}
	return nil
}

// all reads the whole section and returns it.
func (s *lazySection) all() ([]byte, error) {
	if err := s.ensure(s.size); err != nil {
		return nil, err
	}
	return s.data, nil
}

// prefix returns the section as far as it has been read.
func (s *lazySection) prefix() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data[:s.n]
}

// start sets up the reading: an uncompressed section is read from the
// file as needed, a zlib-compressed one inflated as needed (zlibSection);
// anything else is read whole by debug/elf.
func (s *lazySection) start() (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.data, s.n, err = nil, 0, fmt.Errorf("debug/elf panicked: %v", p)
		}
	}()
	f, sec := s.f, s.sec
	if sec.Flags&elf.SHF_COMPRESSED == 0 && f.f != nil && f.ef.Class == elf.ELFCLASS64 {
		s.data, s.r = make([]byte, s.size), io.NewSectionReader(f.f, int64(sec.Offset), int64(sec.Size))
		return nil
	}
	zr, err := zlibSection(f, sec)
	if err != nil {
		return err
	}
	if zr != nil {
		s.data, s.r = make([]byte, s.size), zr
		return nil
	}
	data, err := sec.Data()
	if err != nil {
		return err
	}
	if len(data) != s.size {
		return fmt.Errorf("%d bytes, not the %d its header gives", len(data), s.size)
	}
	s.data, s.n = data, len(data)
	return nil
}

// lazyDWARF is what a dwarfIndex reads its units from while lazy. Its
// fields but the sections and stop are guarded by the Binary's mutex.
type lazyDWARF struct {
	sect  map[string]*lazySection // by name without ".debug_"
	order binary.ByteOrder
	ready bool // the small sections (all but info, abbrev, line) read whole
	// mismatch: a unit read disagreed with .debug_aranges or may refer
	// outside itself; the index must be rebuilt from all units.
	mismatch bool
	stop     atomic.Bool // Close was called: prefill stops
}

// prefill queues the reading of every section whole in the background
// (workQueue): .debug_info; .debug_line; the small sections, then
// .debug_abbrev. They read a chunk at a time, so that a unit asked for
// meanwhile is read as soon as its bytes are in (by its caller, if the
// queue has not reached them). Each stops at the first error (which the
// unit that needs the bytes then reports) or when stop is set; wg is done
// when all have returned.
func (l *lazyDWARF) prefill(wg *sync.WaitGroup) {
	var rest []*lazySection
	for _, name := range []string{"str", "line_str", "str_offsets", "addr", "rnglists", "ranges", "abbrev"} {
		if s := l.sect[name]; s != nil {
			rest = append(rest, s)
		}
	}
	read := func(ss ...*lazySection) {
		defer wg.Done()
		for _, s := range ss {
			for s != nil && !l.stop.Load() {
				s.mu.Lock()
				n, done := s.n, s.started && s.n == len(s.data) || s.err != nil
				s.mu.Unlock()
				if done {
					break
				}
				if s.ensure(n+lazyChunk) != nil {
					return
				}
				// A caller woken by the unlock (it waits for these bytes)
				// runs next on this core; without yielding it would wait
				// out this goroutine's time slice.
				runtime.Gosched()
			}
		}
	}
	wg.Add(3)
	background.add(func() { read(l.sect["info"]) })
	background.add(func() { read(l.sect["line"]) })
	background.add(func() { read(rest...) })
}

// get returns section name read up to end; nil if the file has none.
func (l *lazyDWARF) get(name string, end int) ([]byte, error) {
	s := l.sect[name]
	if s == nil {
		return nil, nil
	}
	if err := s.ensure(end); err != nil {
		return nil, err
	}
	return s.data, nil
}

// newLazyDWARFIndex indexes f's units by .debug_aranges; nil (and no
// error) when the file has no usable .debug_aranges, so the caller reads
// every unit instead. names are the sections to prepare (dwarfSections and
// aranges), whose size the caller has reserved.
func newLazyDWARFIndex(f *elfFile, names []string) (x *dwarfIndex, err error) {
	ar := f.ef.Section(".debug_aranges")
	if ar == nil || ar.Type == elf.SHT_NOBITS || f.ef.Section(".debug_info") == nil {
		return nil, nil
	}
	l := &lazyDWARF{sect: map[string]*lazySection{}, order: f.ef.ByteOrder}
	for _, name := range names {
		s := f.ef.Section(".debug_" + name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
		}
		l.sect[name] = newLazySection(f, s)
	}
	data, err := l.sect["aranges"].all()
	if err != nil {
		return nil, &FormatError{Path: f.path, Msg: "reading .debug_aranges", Err: err}
	}
	x = &dwarfIndex{path: f.path, order: f.ef.ByteOrder, lazy: l}
	if !x.indexAranges(data, l.sect["info"].size) {
		return nil, nil
	}
	return x, nil
}

// indexAranges fills x.units and x.cus from .debug_aranges, in the order
// newDWARFIndex would: units by offset, each unit's ranges in the order
// listed (the producer writes them as the unit's DW_AT_ranges, which
// readUnit checks). It returns false when the table is one this reader
// does not take (segmented addresses, odd sizes, offsets past infoSize).
func (x *dwarfIndex) indexAranges(data []byte, infoSize int) bool {
	bo := x.order
	byOff := map[dwarf.Offset]*cuInfo{}
	for pos := 0; pos < len(data); {
		if len(data)-pos < 4 {
			return false
		}
		length, hdr := uint64(bo.Uint32(data[pos:])), 4
		dwarf64 := length == 0xffffffff
		if dwarf64 {
			if len(data)-pos < 12 {
				return false
			}
			length, hdr = bo.Uint64(data[pos+4:]), 12
		}
		if length > uint64(len(data)-pos-hdr) {
			return false
		}
		end := pos + hdr + int(length)
		set := data[pos+hdr : end]
		pos = end
		offSize := 4
		if dwarf64 {
			offSize = 8
		}
		if len(set) < 2+offSize+2 {
			return false
		}
		var off uint64
		if dwarf64 {
			off = bo.Uint64(set[2:])
		} else {
			off = uint64(bo.Uint32(set[2:]))
		}
		asize, ssize := int(set[2+offSize]), set[3+offSize]
		if version := bo.Uint16(set); version != 2 || ssize != 0 || asize != 8 && asize != 4 || off >= uint64(infoSize) {
			return false
		}
		// Tuples start at a multiple of twice the address size from the
		// start of the set.
		t := hdr + 2 + offSize + 2
		t = (t + 2*asize - 1) / (2 * asize) * (2 * asize)
		cu := byOff[dwarf.Offset(off)]
		if cu == nil {
			cu = &cuInfo{off: dwarf.Offset(off)}
			byOff[cu.off] = cu
		}
		for t -= hdr; t+2*asize <= len(set); t += 2 * asize {
			var lo, n uint64
			if asize == 8 {
				lo, n = bo.Uint64(set[t:]), bo.Uint64(set[t+8:])
			} else {
				lo, n = uint64(bo.Uint32(set[t:])), uint64(bo.Uint32(set[t+4:]))
			}
			if lo == 0 && n == 0 {
				break
			}
			if lo != 0 && lo+n > lo {
				cu.aranges = append(cu.aranges, [2]uint64{lo, lo + n})
			}
		}
	}
	if len(byOff) == 0 {
		return false
	}
	for _, cu := range byOff {
		x.units = append(x.units, cu)
	}
	sort.Slice(x.units, func(i, j int) bool { return x.units[i].off < x.units[j].off })
	for i, cu := range x.units {
		for _, rg := range cu.aranges {
			x.cus = append(x.cus, span{rg[0], rg[1], int32(i)})
		}
	}
	sort.Slice(x.cus, func(i, j int) bool { return x.cus[i].lo < x.cus[j].lo })
	return true
}

// openUnit makes a debug/dwarf.Data holding only the unit at cu.off, with
// the sections it reads inflated far enough: .debug_info to the unit's
// end, .debug_abbrev to its table's end, the small sections whole, and
// .debug_line as far as line (nil: none; see lineFor). Each section is
// handed over as the prefix read so far, bytes that are not written
// again. It sets l.mismatch when the unit's abbreviations allow
// references outside it.
func (l *lazyDWARF) openUnit(cu *cuInfo, line []byte) (*dwarf.Data, error) {
	if !l.ready {
		for name, s := range l.sect {
			if name == "info" || name == "abbrev" || name == "line" {
				continue
			}
			if _, err := s.all(); err != nil {
				return nil, err
			}
		}
		l.ready = true
	}
	bo := l.order
	off := int(cu.off)
	info, err := l.get("info", off+12)
	if err != nil {
		return nil, err
	}
	if off+4 > len(info) {
		return nil, errors.New("unit header past the end of .debug_info")
	}
	length, hdr := uint64(bo.Uint32(info[off:])), 4
	if length == 0xffffffff {
		if off+12 > len(info) {
			return nil, errors.New("unit header past the end of .debug_info")
		}
		length, hdr = bo.Uint64(info[off+4:]), 12
	}
	if length < 7 || length > uint64(len(info)-off-hdr) {
		return nil, fmt.Errorf("unit length %#x does not fit .debug_info", length)
	}
	end := off + hdr + int(length)
	if info, err = l.get("info", end); err != nil {
		return nil, err
	}
	unit := info[off:end]
	version := bo.Uint16(unit[hdr:])
	p := hdr + 2
	if version >= 5 {
		if utype := unit[p]; utype != 1 && utype != 3 { // DW_UT_compile, DW_UT_partial
			l.mismatch = true
			return nil, errUnitNotLazy
		}
		p += 2
	}
	var abbrevOff uint64
	if hdr == 12 {
		if p+8 > len(unit) {
			return nil, errors.New("unit header cut short")
		}
		abbrevOff = bo.Uint64(unit[p:])
	} else {
		if p+4 > len(unit) {
			return nil, errors.New("unit header cut short")
		}
		abbrevOff = uint64(bo.Uint32(unit[p:]))
	}
	s := l.sect["abbrev"]
	if s == nil {
		return nil, errors.New("no .debug_abbrev")
	}
	// Read the table until its end is in: a scan that runs out of bytes
	// asks for twice as many.
	var abbrev []byte
	for want := int(min(abbrevOff, uint64(s.size))) + 4096; ; want *= 2 {
		if err := s.ensure(want); err != nil {
			return nil, err
		}
		abbrev = s.prefix()
		cross, short := crossUnitForms(abbrev, abbrevOff)
		if short && len(abbrev) < s.size {
			continue
		}
		if cross || short {
			l.mismatch = true
			return nil, errUnitNotLazy
		}
		break
	}
	var ranges, str []byte
	if s := l.sect["ranges"]; s != nil {
		ranges = s.data
	}
	if s := l.sect["str"]; s != nil {
		str = s.data
	}
	d, err := dwarf.New(abbrev, nil, nil, unit, line, nil, ranges, str)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"addr", "line_str", "str_offsets", "rnglists"} {
		if s := l.sect[name]; s != nil {
			if err := d.AddSection(".debug_"+name, s.data); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// lineFor reads .debug_line up to the end of the line table at off and
// returns the section as far as read; nil when the file has none.
func (l *lazyDWARF) lineFor(off int64) []byte {
	s := l.sect["line"]
	if s == nil {
		return nil
	}
	if off < 0 || off >= int64(s.size) {
		return s.prefix()
	}
	o := int(off)
	if s.ensure(o+12) != nil {
		return s.prefix()
	}
	b := s.prefix()
	if o+4 > len(b) {
		return b
	}
	length, hdr := uint64(l.order.Uint32(b[o:])), 4
	if length == 0xffffffff && o+12 <= len(b) {
		length, hdr = l.order.Uint64(b[o+4:]), 12
	}
	s.ensure(o + hdr + int(min(length, uint64(s.size))))
	return s.prefix()
}

// errUnitNotLazy: the unit cannot be read on its own.
var errUnitNotLazy = errors.New("unit refers outside itself")

// crossUnitForms scans the abbreviation table at off: cross reports
// a form that refers outside its unit (or one this scan cannot size),
// short that the table runs past the end of abbrev.
func crossUnitForms(abbrev []byte, off uint64) (cross, short bool) {
	if off >= uint64(len(abbrev)) {
		return false, true
	}
	c := lineCursor{b: abbrev, pos: int(off)}
	for !c.err {
		if code := c.uleb(); code == 0 || c.err {
			return false, c.err
		}
		c.uleb() // tag
		c.u8()   // children
		for !c.err {
			attr, form := c.uleb(), c.uleb()
			if attr == 0 && form == 0 {
				break
			}
			switch form {
			case 0x10, 0x1c, 0x20, 0x24, 0x1f20, 0x1f21: // ref_addr, ref_sup4, ref_sig8, ref_sup8, GNU_ref_alt, GNU_strp_alt
				return true, false
			case 0x21: // implicit_const: its value is in the table
				c.uleb()
			}
		}
	}
	return false, true
}

// openDWARF indexes f's DWARF: lazily from .debug_aranges when the file
// has it, else every unit now (dwarfData, newDWARFIndex). The bytes it may
// load are reserved in budget and returned as cost (release it when the
// index is dropped).
func openDWARF(f *elfFile, budget *DWARFBudget) (x *dwarfIndex, cost int64, err error) {
	legacy := f.ef.Type == elf.ET_REL || f.ef.Section(".zdebug_info") != nil
	if s := f.ef.Section(".debug_aranges"); !legacy && s != nil && s.Type != elf.SHT_NOBITS {
		want := func(name string) bool {
			name = strings.TrimPrefix(name, ".debug_")
			return dwarfSections[name] || name == "aranges"
		}
		n, err := dwarfCost(f.ef, want, budget.perBinary())
		if err == nil {
			err = budget.reserve(n)
		}
		if err != nil {
			return nil, 0, &FormatError{Path: f.path, Msg: "loading DWARF", Err: err}
		}
		names := []string{"aranges"}
		for name := range dwarfSections {
			names = append(names, name)
		}
		if x, err = newLazyDWARFIndex(f, names); x != nil && err == nil {
			return x, n, nil
		}
		budget.release(n)
		// Whatever else stopped the lazy index, reading every unit says
		// best what is wrong, or works without .debug_aranges.
	}
	d, line, cost, err := dwarfData(f, budget)
	if err == nil {
		x, err = newDWARFIndex(f.path, d)
	}
	if err != nil {
		budget.release(cost)
		return nil, 0, err
	}
	x.line, x.order = line, f.ef.ByteOrder
	return x, cost, nil
}
