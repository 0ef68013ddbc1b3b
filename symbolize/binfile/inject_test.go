package binfile

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	data, err := os.ReadFile("../../testdata/symfs/tmp/faultline-fixtures/bin/basic")
	if err != nil {
		t.Skip(err)
	}
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
	if b.HasDWARF() {
		t.Error("DWARF loaded from a section claiming 8 GiB")
	}
	if w := strings.Join(b.Warnings, "\n"); !strings.Contains(w, "claims 8589934592 bytes") {
		t.Errorf("warnings do not name the claim:\n%s", w)
	}
}
