package cfi

// buf is a bounds-checked read cursor over one section. It keeps the first
// error (with the section name and offset) and returns zeros after it, so
// parsers check b.err once per entry (as Go's debug/dwarf/buf.go does).
type buf struct {
	sec *section
	off int // next byte to read, as an offset in sec.data
	end int // reads at or beyond end fail
	err error
}

func (b *buf) fail(msg string) {
	if b.err == nil {
		b.err = &FormatError{Section: b.sec.name, Offset: int64(b.off), Msg: msg}
	}
	b.off = b.end
}

func (b *buf) need(n int) bool {
	if b.err != nil {
		return false
	}
	if n < 0 || b.end-b.off < n {
		b.fail("unexpected end of data")
		return false
	}
	return true
}

func (b *buf) u8() uint8 {
	if !b.need(1) {
		return 0
	}
	b.off++
	return b.sec.data[b.off-1]
}

func (b *buf) u16() uint16 { return uint16(b.addr(2)) }
func (b *buf) u32() uint32 { return uint32(b.addr(4)) }
func (b *buf) u64() uint64 { return b.addr(8) }

// addr reads an unsigned number of size bytes (2, 4 or 8) in the section's
// byte order: a target address, or a fixed-size field.
func (b *buf) addr(size int) uint64 {
	if size != 2 && size != 4 && size != 8 {
		b.fail("unsupported address size")
		return 0
	}
	if !b.need(size) {
		return 0
	}
	p := b.sec.data[b.off : b.off+size]
	b.off += size
	switch size {
	case 2:
		return uint64(b.sec.order.Uint16(p))
	case 4:
		return uint64(b.sec.order.Uint32(p))
	}
	return b.sec.order.Uint64(p)
}

func (b *buf) uleb() uint64 {
	v, n := uleb128(b.sec.data[b.off:b.end])
	b.leb(n)
	return v
}

func (b *buf) sleb() int64 {
	v, n := sleb128(b.sec.data[b.off:b.end])
	b.leb(n)
	return v
}

// leb moves past a LEB128 number of n bytes, or fails at the end of the
// entry when n is 0 (the number ran past it).
func (b *buf) leb(n int) {
	if n == 0 {
		b.off = b.end
		b.fail("unexpected end of data")
		return
	}
	b.off += n
}

// uleb128 decodes the unsigned LEB128 number at the start of p and returns
// it with its length in bytes; the length is 0 when p ends inside it. Bits
// beyond 64 are dropped.
func uleb128(p []byte) (v uint64, n int) {
	var shift uint
	for i, c := range p {
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// sleb128 is uleb128 for a signed number: the last byte's bit 6 extends.
func sleb128(p []byte) (int64, int) {
	u, n := uleb128(p)
	v := int64(u)
	if shift := uint(7 * n); n > 0 && shift < 64 && p[n-1]&0x40 != 0 {
		v |= -1 << shift
	}
	return v, n
}

// block returns n bytes as offsets into the section (start, length).
func (b *buf) block(n uint64) (int, int) {
	if n > uint64(b.end-b.off) {
		b.fail("block longer than its entry")
		return 0, 0
	}
	start := b.off
	b.off += int(n)
	return start, int(n)
}

// cstring reads a NUL-terminated string without allocating: it returns the
// bytes before the NUL.
func (b *buf) cstring() []byte {
	if b.err != nil {
		return nil
	}
	for i := b.off; i < b.end; i++ {
		if b.sec.data[i] == 0 {
			s := b.sec.data[b.off:i]
			b.off = i + 1
			return s
		}
	}
	b.fail("unterminated string")
	return nil
}

// encoded reads a pointer in a DW_EH_PE_* encoding. Indirect pointers are
// returned undereferenced (with indirect=true): faultline only skips the
// personality and LSDA pointers that use them.
func (b *buf) encoded(enc byte) (v uint64, indirect bool) {
	if enc == dwEHPEOmit {
		return 0, false
	}
	pos := b.off
	switch enc & 0x0f {
	case dwEHPEAbsptr:
		v = b.addr(b.sec.addrSize)
	case dwEHPEUleb128:
		v = b.uleb()
	case dwEHPEUdata2:
		v = uint64(b.u16())
	case dwEHPEUdata4:
		v = uint64(b.u32())
	case dwEHPEUdata8:
		v = b.u64()
	case dwEHPESleb128:
		v = uint64(b.sleb())
	case dwEHPESdata2:
		v = uint64(int64(int16(b.u16())))
	case dwEHPESdata4:
		v = uint64(int64(int32(b.u32())))
	case dwEHPESdata8:
		v = b.u64()
	default:
		b.off = pos
		b.fail("unsupported pointer encoding")
		return 0, false
	}
	switch enc & 0x70 {
	case 0:
	case dwEHPEPcrel:
		v += b.sec.addr + uint64(pos)
	case dwEHPETextrel:
		v += b.sec.textAddr
	case dwEHPEDatarel:
		v += b.sec.dataAddr
	case dwEHPEFuncrel:
		// Relative to the start of the function; only LSDA pointers use it
		// and faultline skips them.
	case dwEHPEAligned:
		// The value is aligned to the address size; fine for skipping.
	default:
		b.off = pos
		b.fail("unsupported pointer application")
		return 0, false
	}
	if b.sec.addrSize == 4 {
		v &= 0xffffffff
	}
	return v, enc&dwEHPEIndirect != 0
}
