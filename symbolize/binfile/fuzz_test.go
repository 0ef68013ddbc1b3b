package binfile

import (
	"bytes"
	"debug/elf"
	"os"
	"strings"
	"testing"
	"time"
)

// FuzzOpen: arbitrary bytes as a binary. The property: Open returns an
// error or a Binary whose every method answers without panicking.
func FuzzOpen(f *testing.F) {
	for _, name := range []string{"inline", "inline.debug", "inline.stripped"} {
		d, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(d)
		f.Add(d[:len(d)/2])
	}
	f.Add([]byte("\x7fELF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		wd := time.AfterFunc(10*time.Second, func() { panic("WATCHDOG: one input took over 10s") })
		defer wd.Stop()
		l := Locator{FS: memFS{"/bin/x": data, "/bin/x.debug": data}, DebugDirs: []string{"/usr/lib/debug"}}
		b, err := l.Open("/bin/x", "")
		if err != nil {
			_ = err.Error()
			return
		}
		defer b.Close()
		addrs := []uint64{0, 1, 0x1000, 0x10c5, 0x12d5, 0x13c8, ^uint64(0)}
		if ef := b.ELF(); ef != nil {
			addrs = append(addrs, ef.Entry)
			for _, s := range ef.Sections {
				addrs = append(addrs, s.Addr, s.Addr+s.Size/2)
			}
		}
		for i, s := range b.symbols().syms {
			if i > 50 {
				break
			}
			addrs = append(addrs, s.start, s.end-1)
		}
		var out []Frame
		for _, a := range addrs {
			out = b.Symbolize(a, out[:0])
			if len(out) == 0 {
				t.Fatalf("no frame for %#x", a)
			}
			_, _ = b.offsetToVaddr(a)
			_, _ = b.vaddrToOffset(a)
		}
	})
}

// FuzzDWARF corrupts the DWARF of a real debug file (one patch inside one
// .debug_* section of testdata/inline.debug), which reaches the unit, line
// table and inline-tree readers far more often than random ELF bytes do.
// The property: no panic, and every address gets at least one frame.
func FuzzDWARF(f *testing.F) {
	base, err := os.ReadFile("testdata/inline.debug")
	if err != nil {
		f.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(base))
	if err != nil {
		f.Fatal(err)
	}
	var secs []*elf.Section
	for _, s := range ef.Sections {
		if strings.HasPrefix(s.Name, ".debug_") && s.Type != elf.SHT_NOBITS && s.Flags&elf.SHF_COMPRESSED == 0 && s.Size > 0 {
			secs = append(secs, s)
		}
	}
	if len(secs) == 0 {
		f.Fatal("no uncompressed .debug_ sections in testdata/inline.debug")
	}
	for i := range secs {
		f.Add(uint8(i), uint16(0), []byte{0xff})
		f.Add(uint8(i), uint16(12), []byte{0, 0, 0, 0})
	}
	f.Fuzz(func(t *testing.T, which uint8, off uint16, patch []byte) {
		s := secs[int(which)%len(secs)]
		data := bytes.Clone(base)
		at := s.Offset + uint64(off)%s.Size
		copy(data[at:s.Offset+s.Size], patch)
		l := Locator{FS: memFS{"/x.debug": data}}
		b, err := l.Open("/x.debug", "")
		if err != nil {
			return
		}
		defer b.Close()
		var out []Frame
		for a := uint64(0x1000); a < 0x1600; a += 5 {
			out = b.Symbolize(a, out[:0])
			if len(out) == 0 {
				t.Fatalf("no frame for %#x", a)
			}
		}
	})
}
