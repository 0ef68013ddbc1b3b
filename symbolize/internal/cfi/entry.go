package cfi

import "encoding/binary"

// section is one CFI section's bytes and where they are mapped.
type section struct {
	name     string
	data     []byte
	addr     uint64 // virtual address of data[0] (for pcrel pointers)
	eh       bool   // .eh_frame rules (CIE id 0, relative CIE pointers, augmentations)
	order    binary.ByteOrder
	addrSize int
	textAddr uint64 // base for DW_EH_PE_textrel
	dataAddr uint64 // base for DW_EH_PE_datarel
}

// cie is a parsed Common Information Entry. Its initial instructions stay in
// the section (insStart..insEnd) and are interpreted only when asked for.
type cie struct {
	off       int
	version   uint8
	codeAlign uint64
	dataAlign int64
	raReg     uint64
	fdeEnc    byte
	lsdaEnc   byte
	hasAugLen bool // 'z': FDEs carry an augmentation length
	signal    bool // 'S'
	insStart  int
	insEnd    int
}

// fde is a parsed Frame Description Entry.
type fde struct {
	off      int
	cie      cie
	begin    uint64
	end      uint64
	insStart int
	insEnd   int
}

// entryHeader reads an entry's initial length and CIE id / pointer field.
// It returns the offset of the id field, the end of the entry, the id value
// and whether the entry uses the 64-bit DWARF format. A zero length (a
// terminator) returns end == start+4 and isZero.
type entryHeader struct {
	start   int
	idPos   int
	end     int
	id      uint64
	dwarf64 bool
	zero    bool
}

func readEntryHeader(s *section, off int) (entryHeader, error) {
	b := buf{sec: s, off: off, end: len(s.data)}
	h := entryHeader{start: off}
	length := uint64(b.u32())
	if b.err != nil {
		return h, b.err
	}
	if length == 0 {
		h.zero = true
		h.end = b.off
		return h, nil
	}
	if length == 0xffffffff {
		h.dwarf64 = true
		length = b.u64()
	} else if length >= 0xfffffff0 {
		b.off = off
		b.fail("reserved initial length value")
		return h, b.err
	}
	if b.err != nil {
		return h, b.err
	}
	if length > uint64(len(s.data)-b.off) {
		b.off = off
		b.fail("entry length runs past the end of the section")
		return h, b.err
	}
	h.end = b.off + int(length)
	b.end = h.end
	h.idPos = b.off
	if h.dwarf64 && !s.eh {
		h.id = b.u64()
	} else {
		// .eh_frame CIE pointers are 4 bytes even in the 64-bit format
		// (LSB 5.0; gimli does the same).
		h.id = uint64(b.u32())
	}
	return h, b.err
}

// isCIE tells whether an entry with this header is a CIE.
func (s *section) isCIE(h entryHeader) bool {
	if s.eh {
		return h.id == 0
	}
	if h.dwarf64 {
		return h.id == 0xffffffffffffffff
	}
	return h.id == 0xffffffff
}

// cieOffset returns the section offset of the CIE an FDE points to.
func (s *section) cieOffset(h entryHeader) (int, bool) {
	if s.eh {
		// Relative to the CIE pointer field itself, pointing backwards.
		if h.id > uint64(h.idPos) {
			return 0, false
		}
		return h.idPos - int(h.id), true
	}
	if h.id >= uint64(len(s.data)) {
		return 0, false
	}
	return int(h.id), true
}

// parseCIE decodes the CIE at off.
func parseCIE(s *section, off int) (cie, error) {
	c := cie{off: off, fdeEnc: dwEHPEAbsptr, lsdaEnc: dwEHPEOmit}
	h, err := readEntryHeader(s, off)
	if err != nil {
		return c, err
	}
	if h.zero || !s.isCIE(h) {
		return c, &FormatError{Section: s.name, Offset: int64(off), Msg: "FDE's CIE pointer does not point at a CIE"}
	}
	b := buf{sec: s, off: h.idPos + 4, end: h.end}
	if h.dwarf64 && !s.eh {
		b.off = h.idPos + 8
	}
	c.version = b.u8()
	switch c.version {
	case 1, 3, 4:
	default:
		if b.err == nil {
			b.off--
			b.fail("unsupported CIE version")
		}
		return c, b.err
	}
	aug := b.cstring()
	if c.version == 4 {
		addrSize := b.u8()
		segSize := b.u8()
		if b.err == nil && (segSize != 0 || (addrSize != 2 && addrSize != 4 && addrSize != 8)) {
			b.fail("unsupported address or segment size")
		}
	}
	c.codeAlign = b.uleb()
	c.dataAlign = b.sleb()
	if c.version == 1 {
		c.raReg = uint64(b.u8())
	} else {
		c.raReg = b.uleb()
	}
	if b.err != nil {
		return c, b.err
	}
	augEnd := -1
	for i := 0; i < len(aug); i++ {
		switch aug[i] {
		case 'z':
			if i != 0 {
				b.fail("augmentation 'z' not first")
				return c, b.err
			}
			n := b.uleb()
			if b.err == nil && n > uint64(b.end-b.off) {
				b.fail("augmentation data longer than the CIE")
				return c, b.err
			}
			c.hasAugLen = true
			augEnd = b.off + int(n)
		case 'R':
			c.fdeEnc = b.u8()
		case 'L':
			c.lsdaEnc = b.u8()
		case 'P':
			enc := b.u8()
			b.encoded(enc)
		case 'S':
			c.signal = true
		case 'B', 'G':
			// AArch64 pointer authentication key B / memory tagging: no
			// effect on the rules faultline computes.
		case 'e':
			// Old GCC "eh" augmentation: an address-sized eh_ptr follows.
			if i+1 < len(aug) && aug[i+1] == 'h' {
				b.addr(s.addrSize)
				i++
				continue
			}
			fallthrough
		default:
			if !c.hasAugLen {
				b.fail("unknown augmentation " + string(aug))
				return c, b.err
			}
			// With 'z' the rest of the augmentation data can be skipped.
			i = len(aug)
		}
		if b.err != nil {
			return c, b.err
		}
	}
	if augEnd >= 0 {
		b.off = augEnd
	}
	c.insStart, c.insEnd = b.off, h.end
	return c, b.err
}

// parseFDE decodes the FDE at off together with its CIE.
func parseFDE(s *section, off int) (fde, error) {
	f := fde{off: off}
	h, err := readEntryHeader(s, off)
	if err != nil {
		return f, err
	}
	if h.zero || s.isCIE(h) {
		return f, &FormatError{Section: s.name, Offset: int64(off), Msg: "expected an FDE"}
	}
	cieOff, ok := s.cieOffset(h)
	if !ok {
		return f, &FormatError{Section: s.name, Offset: int64(h.idPos), Msg: "CIE pointer out of range"}
	}
	f.cie, err = parseCIE(s, cieOff)
	if err != nil {
		return f, err
	}
	b := buf{sec: s, off: h.idPos + 4, end: h.end}
	if h.dwarf64 && !s.eh {
		b.off = h.idPos + 8
	}
	return finishFDE(&b, f)
}

func finishFDE(b *buf, f fde) (fde, error) {
	begin, ind := b.encoded(f.cie.fdeEnc)
	if ind && b.err == nil {
		b.fail("indirect FDE address is not supported")
	}
	// The range uses the value format only (no pcrel etc.).
	length, _ := b.encoded(f.cie.fdeEnc & 0x0f)
	if f.cie.hasAugLen {
		n := b.uleb()
		if b.err == nil && n > uint64(b.end-b.off) {
			b.fail("augmentation data longer than the FDE")
		}
		b.off += int(n)
	}
	if b.err != nil {
		return f, b.err
	}
	f.begin = begin
	f.end = begin + length
	if f.end < f.begin {
		f.end = ^uint64(0)
	}
	f.insStart, f.insEnd = b.off, b.end
	return f, nil
}
