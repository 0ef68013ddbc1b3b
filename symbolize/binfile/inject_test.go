package binfile

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// compressedClaim rewrites section name of an ELF64 little-endian file as
// SHF_COMPRESSED with a zlib header claiming size bytes: what a
// decompression bomb looks like to debug/elf before it inflates anything.
func compressedClaim(t *testing.T, data []byte, name string, size uint64) []byte {
	t.Helper()
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	shoff, shentsize := le.Uint64(data[0x28:]), uint64(le.Uint16(data[0x3a:]))
	for i, s := range ef.Sections {
		if s.Name != name {
			continue
		}
		out := append([]byte(nil), data...)
		sh := shoff + uint64(i)*shentsize
		le.PutUint64(out[sh+8:], le.Uint64(out[sh+8:])|uint64(elf.SHF_COMPRESSED))
		le.PutUint32(out[s.Offset:], uint32(elf.COMPRESS_ZLIB))
		le.PutUint64(out[s.Offset+8:], size)
		le.PutUint64(out[s.Offset+16:], 1)
		return out
	}
	t.Fatalf("no section %s", name)
	return nil
}

// TestDWARFSizeClaimCapped: a debug section claiming more than
// maxDWARFSection (a zlib bomb's header) is refused before anything is
// inflated; the binary still opens and names frames from its symbols.
func TestDWARFSizeClaimCapped(t *testing.T) {
	data := perftest.ReadTestdata(t, "symfs/tmp/faultline-fixtures/bin/basic")
	dir := t.TempDir()
	path := filepath.Join(dir, "basic")
	if err := os.WriteFile(path, compressedClaim(t, data, ".debug_info", 8<<30), 0o755); err != nil {
		t.Fatal(err)
	}
	l := Locator{}
	b, err := l.Open(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if b.hasDWARF() {
		t.Error("DWARF loaded from a section claiming 8 GiB")
	}
	if w := warningText(b.Warnings); !strings.Contains(w, "claims 8589934592 bytes") {
		t.Errorf("warnings do not name the claim:\n%s", w)
	}
}

// TestLineHeaderGuardAcceptsReal: checkLineHeader passes every line table
// of real DWARF 5 debug files (glibc's, gcc's inline fixture), and refuses
// a header whose directory count outgrows its unit. The crasher that
// prompted it is testdata/fuzz/FuzzDWARF/62080e8eb0b7e1f0.
func TestLineHeaderGuardAcceptsReal(t *testing.T) {
	paths, _ := filepath.Glob("../../testdata/symfs/usr/lib/debug/.build-id/*/*.debug")
	paths = append(paths, "testdata/inline.debug")
	v5 := 0
	for _, path := range paths {
		ef, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		f := &elfFile{path: path, ef: ef}
		d, line, _, err := dwarfData(f, nil)
		if err != nil || line == nil {
			t.Fatalf("%s: %v", path, err)
		}
		r := d.Reader()
		for {
			e, err := r.Next()
			if err != nil || e == nil {
				break
			}
			if off, ok := e.Val(dwarf.AttrStmtList).(int64); ok {
				if err := checkLineHeader(line, off, ef.ByteOrder); err != nil {
					t.Errorf("%s: %v", path, err)
				}
				if ef.ByteOrder.Uint16(line[off+4:]) >= 5 {
					v5++
					if v5 == 1 {
						// Patch the directory count (after the fixed
						// fields and opcode lengths) to 2^35.
						bad := append([]byte(nil), line...)
						pos := int(off) + 4 + 2 + 2 + 4 + 5
						nops := int(bad[pos])
						pos += nops // opcode_base byte, then opcode_base-1 one-byte ULEBs
						nf := int(bad[pos])
						pos++
						for range 2 * nf {
							pos++ // content types and forms are one-byte ULEBs in practice
						}
						copy(bad[pos:], []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
						if err := checkLineHeader(bad, off, ef.ByteOrder); err == nil {
							t.Errorf("%s: a directory count of 2^35 passed", path)
						}
					}
				}
			}
			r.SkipChildren()
		}
		ef.Close()
	}
	if v5 == 0 {
		t.Error("no DWARF 5 line table checked")
	}
	t.Logf("%d DWARF 5 line tables checked", v5)
}
