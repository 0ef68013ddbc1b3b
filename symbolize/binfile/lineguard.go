package binfile

import (
	"encoding/binary"
	"fmt"
)

// checkLineHeader vets the DWARF 5 line-program header at off in .debug_line
// before debug/dwarf reads it: LineReader allocates its directory and file
// tables by the counts in the header (make([]string, count)), so a corrupt
// count asks for terabytes and the runtime dies with "out of memory" — a
// fatal error, not a panic that can be recovered (found by FuzzDWARF, Go
// 1.26 debug/dwarf/line.go readHeader). Every entry takes at least one
// byte, so a count larger than the rest of the unit is corrupt. Versions
// before 5 read NUL-terminated lists and need no check.
func checkLineHeader(line []byte, off int64, bo binary.ByteOrder) error {
	if bo == nil || off < 0 || off >= int64(len(line)) {
		return nil // debug/dwarf reports these itself
	}
	c := lineCursor{b: line, pos: int(off), bo: bo}
	dwarf64 := false
	length := uint64(c.u32())
	if length == 0xffffffff {
		dwarf64, length = true, c.u64()
	}
	_ = length // debug/dwarf reads the header on past the unit's end, and so must this check
	version := c.u16()
	if c.err || version < 5 {
		return nil
	}
	c.skip(2) // address_size, segment_selector_size
	if dwarf64 {
		c.skip(8)
	} else {
		c.skip(4)
	}
	c.skip(5) // min_inst_length, max_ops_per_inst, default_is_stmt, line_base, line_range
	opcodeBase := c.u8()
	for i := 1; i < int(opcodeBase) && !c.err; i++ {
		c.uleb()
	}
	for _, what := range []string{"directory", "file name"} {
		nf := int(c.u8())
		forms := make([]uint64, 0, nf)
		for range nf {
			c.uleb() // content type
			forms = append(forms, c.uleb())
		}
		n := c.uleb()
		if c.err {
			return fmt.Errorf("line table at %#x: %s list runs past the section", off, what)
		}
		if n > uint64(len(c.b)-c.pos) {
			return fmt.Errorf("line table at %#x claims %d %s entries in %d bytes", off, n, what, len(c.b)-c.pos)
		}
		if what == "file name" {
			break
		}
		for range n {
			for _, form := range forms {
				if !c.skipForm(form, dwarf64) {
					return fmt.Errorf("line table at %#x: %s entry with form %#x", off, what, form)
				}
			}
			if c.err {
				return fmt.Errorf("line table at %#x: %s entries run past the section", off, what)
			}
		}
	}
	return nil
}

// lineCursor reads a line-program header; err sticks at the first read
// past the end.
type lineCursor struct {
	b   []byte
	pos int
	bo  binary.ByteOrder
	err bool
}

func (c *lineCursor) need(n int) bool {
	if c.err || n > len(c.b)-c.pos {
		c.err = true
		return false
	}
	return true
}

func (c *lineCursor) skip(n int) {
	if c.need(n) {
		c.pos += n
	}
}

func (c *lineCursor) u8() uint8 {
	if !c.need(1) {
		return 0
	}
	c.pos++
	return c.b[c.pos-1]
}

func (c *lineCursor) u16() uint16 { return uint16(c.fixed(2)) }
func (c *lineCursor) u32() uint32 { return uint32(c.fixed(4)) }
func (c *lineCursor) u64() uint64 { return c.fixed(8) }

// fixed reads an n-byte (2, 4 or 8) unsigned number in the file's byte order.
func (c *lineCursor) fixed(n int) uint64 {
	if !c.need(n) {
		return 0
	}
	p := c.b[c.pos : c.pos+n]
	c.pos += n
	switch n {
	case 2:
		return uint64(c.bo.Uint16(p))
	case 4:
		return uint64(c.bo.Uint32(p))
	}
	return c.bo.Uint64(p)
}

func (c *lineCursor) uleb() uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		b := c.u8()
		if c.err {
			return 0
		}
		if shift < 64 {
			v |= uint64(b&0x7f) << shift
		}
		if b&0x80 == 0 {
			return v
		}
	}
}

// skipForm skips one attribute value exactly as debug/dwarf's readLNCT
// reads it (Go 1.26 debug/dwarf/line.go); false for a form readLNCT does not decode.
func (c *lineCursor) skipForm(form uint64, dwarf64 bool) bool {
	switch form {
	case 0x08: // DW_FORM_string
		for !c.err && c.u8() != 0 {
		}
	case 0x0e, 0x1f: // DW_FORM_strp, line_strp
		if dwarf64 {
			c.skip(8)
		} else {
			c.skip(4)
		}
	case 0x1a, 0x0f: // DW_FORM_strx, udata
		c.uleb()
	case 0x25, 0x0b: // DW_FORM_strx1, data1
		c.skip(1)
	case 0x26, 0x05: // DW_FORM_strx2, data2
		c.skip(2)
	case 0x27: // DW_FORM_strx3
		c.skip(3)
	case 0x28, 0x06: // DW_FORM_strx4, data4
		c.skip(4)
	case 0x07: // DW_FORM_data8
		c.skip(8)
	case 0x1e: // DW_FORM_data16
		c.skip(16)
	case 0x09: // DW_FORM_block
		c.skip(int(min(c.uleb(), uint64(len(c.b))+1)))
	default:
		// debug/dwarf's readLNCT silently reads nothing for any other
		// form, so skipping its bytes here would put this check out of
		// step with it: refuse the table instead.
		return false
	}
	return true
}
