package cfi

import "encoding/binary"

// ehBuilder hand-assembles .eh_frame / .debug_frame sections for tests.
type ehBuilder struct {
	b       []byte
	addr    uint64 // section address
	debug   bool   // .debug_frame conventions
	dwarf64 bool
}

func uleb(v uint64) []byte {
	var out []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, c|0x80)
			continue
		}
		return append(out, c)
	}
}

func sleb(v int64) []byte {
	var out []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// entry appends an entry whose body (after the length) is body, padded with
// DW_CFA_nop to a multiple of the address size, and returns its offset.
func (e *ehBuilder) entry(body func(start int) []byte) int {
	start := len(e.b)
	hdr := 4
	if e.dwarf64 {
		hdr = 12
	}
	bd := body(start + hdr)
	for (hdr+len(bd))%8 != 0 {
		bd = append(bd, 0)
	}
	if e.dwarf64 {
		e.b = binary.LittleEndian.AppendUint32(e.b, 0xffffffff)
		e.b = binary.LittleEndian.AppendUint64(e.b, uint64(len(bd)))
	} else {
		e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(bd)))
	}
	e.b = append(e.b, bd...)
	return start
}

func (e *ehBuilder) id(v uint64) []byte {
	if e.debug && e.dwarf64 {
		return binary.LittleEndian.AppendUint64(nil, v)
	}
	return binary.LittleEndian.AppendUint32(nil, uint32(v))
}

// cie appends a version-1 CIE (code align 1, data align -8, RA column 16).
// aug is e.g. "zR" (with FDE encoding pcrel|sdata4) or "zRS" or "".
func (e *ehBuilder) cie(aug string, ins ...byte) int {
	return e.cieV(1, aug, 1, -8, 16, ins...)
}

func (e *ehBuilder) cieV(version byte, aug string, codeAlign uint64, dataAlign int64, ra uint64, ins ...byte) int {
	return e.entry(func(int) []byte {
		idv := uint64(0)
		if e.debug {
			idv = 0xffffffff
			if e.dwarf64 {
				idv = 0xffffffffffffffff
			}
		}
		b := cat(e.id(idv), []byte{version}, []byte(aug), []byte{0})
		if version == 4 {
			b = append(b, 8, 0) // address_size, segment_selector_size
		}
		b = cat(b, uleb(codeAlign), sleb(dataAlign))
		if version == 1 {
			b = append(b, byte(ra))
		} else {
			b = append(b, uleb(ra)...)
		}
		if len(aug) > 0 && aug[0] == 'z' {
			var ad []byte
			for _, c := range aug[1:] {
				switch c {
				case 'R':
					ad = append(ad, 0x1b) // DW_EH_PE_pcrel|sdata4
				case 'L':
					ad = append(ad, 0x1b)
				case 'P':
					ad = append(ad, 0x9b, 0, 0, 0, 0) // indirect|pcrel|sdata4, 0
				}
			}
			b = cat(b, uleb(uint64(len(ad))), ad)
		}
		return append(b, ins...)
	})
}

// fde appends an FDE for [begin, begin+size). In .eh_frame the CIE must use
// "zR" (pcrel sdata4); in .debug_frame addresses are absolute 8-byte.
func (e *ehBuilder) fde(cieOff int, begin, size uint64, ins ...byte) int {
	return e.entry(func(bodyStart int) []byte {
		var b []byte
		if e.debug {
			b = e.id(uint64(cieOff))
			b = binary.LittleEndian.AppendUint64(b, begin)
			b = binary.LittleEndian.AppendUint64(b, size)
			return append(b, ins...)
		}
		b = e.id(uint64(bodyStart - cieOff))
		pos := e.addr + uint64(bodyStart+4)
		b = binary.LittleEndian.AppendUint32(b, uint32(begin-pos))
		b = binary.LittleEndian.AppendUint32(b, uint32(size))
		b = append(b, 0) // augmentation data length
		return append(b, ins...)
	})
}

func (e *ehBuilder) table(t interface{ Fatal(...any) }) *Table {
	s := Sections{EhFrame: e.b, EhFrameAddr: e.addr}
	if e.debug {
		s = Sections{DebugFrame: [][]byte{e.b}}
	}
	tab, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}
