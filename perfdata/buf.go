package perfdata

import (
	"encoding/binary"
	"fmt"
)

// buf is a bounds-checked read cursor over one region of the input. It keeps
// the first error and returns zeros after it, so a parser reads all fields and
// checks err once. (After Go's debug/dwarf/buf.go.)
type buf struct {
	b    []byte
	off  int   // read position in b
	base int64 // file offset of b[0], for error messages
	bo   binary.ByteOrder
	what string // what is being read, for error messages
	err  error
}

func makeBuf(b []byte, base int64, bo binary.ByteOrder, what string) buf {
	return buf{b: b, base: base, bo: bo, what: what}
}

func (b *buf) fail(n int) {
	if b.err == nil {
		b.err = &FormatError{
			Offset: b.base + int64(b.off),
			Msg:    fmt.Sprintf("%s: need %d bytes, only %d left", b.what, n, len(b.b)-b.off),
		}
	}
	b.off = len(b.b)
}

func (b *buf) left() int { return len(b.b) - b.off }

func (b *buf) pos() int64 { return b.base + int64(b.off) }

// take returns the next n bytes, or nil once they are not there.
func (b *buf) take(n int) []byte {
	v := b.b[b.off:]
	if len(v) < n {
		b.fail(n)
		return nil
	}
	b.off += n
	return v[:n]
}

func (b *buf) u8() uint8 {
	if p := b.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (b *buf) u16() uint16 {
	if p := b.take(2); p != nil {
		return b.bo.Uint16(p)
	}
	return 0
}

func (b *buf) u32() uint32 {
	if p := b.take(4); p != nil {
		return b.bo.Uint32(p)
	}
	return 0
}

func (b *buf) u64() uint64 {
	if p := b.take(8); p != nil {
		return b.bo.Uint64(p)
	}
	return 0
}

// u64If reads a u64 when has is set and returns 0 without reading otherwise:
// a field that a format word (sample_type, read_format) may leave out.
func (b *buf) u64If(has bool) uint64 {
	if !has {
		return 0
	}
	return b.u64()
}

// bytes returns the next n bytes without copying.
func (b *buf) bytes(n uint64) []byte {
	if uint64(b.left()) < n {
		b.fail(int(min(n, 1<<62)))
		return nil
	}
	v := b.b[b.off : b.off+int(n) : b.off+int(n)]
	b.off += int(n)
	return v
}

func (b *buf) skip(n uint64) { b.bytes(n) }

// cstring returns a NUL-terminated string padded to n bytes (or the rest).
func cstr(p []byte) string {
	for i, c := range p {
		if c == 0 {
			return string(p[:i])
		}
	}
	return string(p)
}

// u64s decodes n 64-bit words into dst (reused), checking the length first.
func (b *buf) u64s(dst []uint64, n uint64) []uint64 {
	if n > uint64(b.left())/8 {
		b.fail(int(min(n, 1<<59) * 8))
		return dst[:0]
	}
	p := b.b[b.off:]
	dst = dst[:0]
	if b.bo == binary.LittleEndian {
		for i := uint64(0); i < n; i++ {
			dst = append(dst, binary.LittleEndian.Uint64(p[i*8:]))
		}
	} else {
		for i := uint64(0); i < n; i++ {
			dst = append(dst, b.bo.Uint64(p[i*8:]))
		}
	}
	b.off += int(n) * 8
	return dst
}

// count reads the u64 count of an array of size-byte entries. A count the
// rest of the record cannot hold fails, before anything is allocated for
// it, and reads as 0.
func (b *buf) count(size int) uint64 {
	n := b.u64()
	if n > uint64(b.left())/uint64(size) {
		b.fail(int(min(n, 1<<40)) * size)
		return 0
	}
	return n
}

// headerString reads a perf_header_string: u32 len, then len bytes holding a
// NUL-terminated, padded string.
func (b *buf) headerString() string {
	n := b.u32()
	return cstr(b.bytes(uint64(n)))
}
