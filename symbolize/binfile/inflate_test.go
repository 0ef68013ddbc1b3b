package binfile

import (
	"bytes"
	"debug/elf"
	"os"
	"testing"
)

// TestInflateSectionMatchesDebugElf: every compressed section of the
// committed libc and ld.so debug files (zlib, SHF_COMPRESSED) inflates to
// the bytes debug/elf's Section.Data gives.
func TestInflateSectionMatchesDebugElf(t *testing.T) {
	n := 0
	for _, path := range []string{
		"../../testdata/symfs/usr/lib/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug",
		"../../testdata/symfs/usr/lib/debug/.build-id/7e/bc65e52f2bbea498b4040fa92f7238377aaba9.debug",
	} {
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		ef, err := elf.NewFile(fh)
		if err != nil {
			t.Fatal(err)
		}
		f := &elfFile{path: path, f: fh, ef: ef}
		for _, s := range ef.Sections {
			if s.Flags&elf.SHF_COMPRESSED == 0 {
				continue
			}
			n++
			want, err := s.Data()
			if err != nil {
				t.Fatal(err)
			}
			got, err := inflateSection(f, s)
			if err != nil {
				t.Fatalf("%s %s: %v", path, s.Name, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s %s: %d bytes, debug/elf %d, contents differ", path, s.Name, len(got), len(want))
			}
		}
	}
	if n < 4 {
		t.Fatalf("%d compressed sections in the committed debug files, want the dozen or so there are", n)
	}
}
