package binfile

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func openFixture(t testing.TB, name string) *Binary {
	t.Helper()
	abs, err := filepath.Abs("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := (&Locator{}).Open(abs, "")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSymbolizeCxx checks one inline chain field by field. Expected values
// from binutils: addr2line -f -i -e testdata/cxx 0x13c8 (raw names) and
// addr2line -f -i -C (demangled); nm testdata/cxx for the symbol start.
func TestSymbolizeCxx(t *testing.T) {
	b := openFixture(t, "cxx")
	defer b.Close()
	got := b.Symbolize(0x13c8, nil)
	want := []Frame{
		{Func: "fl::Acc<int>::add(int)", System: "_ZN2fl3AccIiE3addEi", File: "/fixture/cxx.cc", Line: 10, Inlined: true,
			Symbol: "fl::Acc<int>::sum(std::vector<int, std::allocator<int> > const&)", SymOffset: 0x18},
		{Func: "fl::Acc<int>::sum(std::vector<int, std::allocator<int> > const&)", System: "_ZN2fl3AccIiE3sumERKSt6vectorIiSaIiEE",
			File: "/fixture/cxx.cc", Line: 17, Symbol: "fl::Acc<int>::sum(std::vector<int, std::allocator<int> > const&)", SymOffset: 0x18},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("frame %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestSymbolizeAliases: real_impl and its weak alias alias_weak share an
// address; perf's choose_best_symbol keeps the global one (nm testdata/inline:
// "1420 T real_impl", "1420 W alias_weak").
func TestSymbolizeAliases(t *testing.T) {
	b := openFixture(t, "inline")
	defer b.Close()
	if s := b.symbols().lookup(0x1421); s == nil || s.name != "real_impl" {
		t.Errorf("symbol at 0x1421: %+v, want real_impl", s)
	}
}

// TestSymbolizeNoSymbols: a stripped binary without its debug file has no
// symbol for its own functions: [unknown], not a wrong name.
func TestSymbolizeNoSymbols(t *testing.T) {
	l := Locator{FS: memFS{"/x/inline": readFixture(t, "inline.stripped")}}
	b, err := l.Open("/x/inline", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.hasDWARF() || len(b.Warnings) == 0 {
		t.Errorf("HasDWARF %v, warnings %q", b.hasDWARF(), b.Warnings)
	}
	for _, a := range []uint64{0x12d5, 0x10c5, 0, 1 << 40} {
		if f := b.Symbolize(a, nil); len(f) != 1 || f[0].Func != Unknown {
			t.Errorf("%#x: got %+v", a, f)
		}
	}
}

// TestMapping: program headers from readelf -lW testdata/inline:
//
//	LOAD 0x001000 0x0000000000001000 … 0x000521 0x000521 R E
//	LOAD 0x002dd0 0x0000000000003dd0 … 0x000278 0x000280 RW
func TestMapping(t *testing.T) {
	b := openFixture(t, "inline")
	defer b.Close()
	for _, tc := range []struct{ off, vaddr uint64 }{{0x1234, 0x1234}, {0x2dd8, 0x3dd8}, {0x2d00, 0x3d00}} {
		if v, ok := b.offsetToVaddr(tc.off); !ok || v != tc.vaddr {
			t.Errorf("OffsetToVaddr(%#x) = %#x, %v; want %#x", tc.off, v, ok, tc.vaddr)
		}
	}
	if o, ok := b.vaddrToOffset(0x3dd8); !ok || o != 0x2dd8 {
		t.Errorf("VaddrToOffset(0x3dd8) = %#x, %v", o, ok)
	}
	if v, ok := b.MappedVaddr(0x7f0000001010, 0x7f0000001000, 0x1000); !ok || v != 0x1010 {
		t.Errorf("MappedVaddr = %#x, %v", v, ok)
	}
	if _, ok := b.offsetToVaddr(1 << 40); ok {
		t.Error("offset past the file converted")
	}
}

func TestKallsyms(t *testing.T) {
	in := "ffffffff81000000 T _stext\nffffffff81000010 t helper\nffffffff81000010 T helper_alias\n" +
		"ffffffff81002000 D some_data\nffffffff81003000 T last_kernel\nffffffffc0001000 t mod_fn\t[xfs]\nffffffffc0001100 t mod_fn2\t[xfs]\n"
	k, err := ParseKallsyms(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr      uint64
		name, mod string
		off       uint64
		ok        bool
	}{
		{0xffffffff81000005, "_stext", "", 5, true},
		{0xffffffff81000020, "helper", "", 0x10, true},
		{0xffffffff81003010, "last_kernel", "", 0x10, true},
		{0xffffffffa0000000, "", "", 0, false}, // the gap between kernel and modules
		{0xffffffffc0001104, "mod_fn2", "xfs", 4, true},
		{0x1000, "", "", 0, false},
	} {
		name, mod, off, ok := k.lookup(tc.addr)
		if name != tc.name || mod != tc.mod || off != tc.off || ok != tc.ok {
			t.Errorf("%#x: got %q %q %#x %v", tc.addr, name, mod, off, ok)
		}
	}
	var nilK *Kallsyms
	if f := nilK.Symbolize(0xffffffff81000000, nil); f[0].Func != kernelName {
		t.Errorf("nil kallsyms: %+v", f)
	}
	if _, err := ParseKallsyms(strings.NewReader("0000000000000000 T _stext\n0000000000000000 t x\n")); err != errKallsymsRestricted {
		t.Errorf("zeroed kallsyms: %v", err)
	}
	if _, err := ParseKallsyms(strings.NewReader("zz T x\n")); err == nil {
		t.Error("bad address accepted")
	}
}

// TestCache: one open per build ID, misses cached too.
func TestCache(t *testing.T) {
	bid, _ := fixtureIDs(t)
	fsys := &countFS{memFS: memFS{"/a/inline": readFixture(t, "inline")}}
	c := NewCache(Locator{FS: fsys})
	defer c.Close()
	b1, err := c.Open(Key{Path: "/a/inline", BuildID: bid})
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := c.Open(Key{Path: "/other/name", BuildID: bid})
	if b1 != b2 {
		t.Error("same build ID opened twice")
	}
	_, err1 := c.Open(Key{Path: "/missing"})
	n := fsys.stats
	_, err2 := c.Open(Key{Path: "/missing"})
	if err1 == nil || err1 != err2 || fsys.stats != n {
		t.Errorf("miss not cached: %v %v, %d → %d stats", err1, err2, n, fsys.stats)
	}
}

type countFS struct {
	memFS
	stats int
}

func (c *countFS) Stat(name string) (fs.FileInfo, error) { c.stats++; return c.memFS.Stat(name) }

// TestBuildIDNote parses notes as readelf -n shows them.
func TestBuildIDNote(t *testing.T) {
	f, err := elf.NewFile(bytes.NewReader(readFixture(t, "inline")))
	if err != nil {
		t.Fatal(err)
	}
	if id := readBuildID(f); len(id) != 40 {
		t.Errorf("build ID %q", id)
	}
	if id := noteBuildID([]byte{4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 3, 0, 0, 0, 'G', 'N', 'U', 0}, binary.LittleEndian); id != "" {
		t.Errorf("oversized note accepted: %q", id)
	}
}

// TestDemangle: C++ expectations from c++filt (binutils 2.40); Rust ones
// as addr2line -C and rustfilt print them, without the legacy hash.
func TestDemangle(t *testing.T) {
	for in, want := range map[string]string{
		"_ZN2fl3AccIiE3sumERKSt6vectorIiSaIiEE":  "fl::Acc<int>::sum(std::vector<int, std::allocator<int> > const&)",
		"_ZN3foo3barEv.cold":                     "foo::bar() [clone .cold]",
		"_Z3fooi.constprop.0":                    "foo(int) [clone .constprop.0]",
		"_ZN4core3fmt5write17h0123456789abcdefE": "core::fmt::write",
		"_RNvCs1234_7mycrate3foo":                "mycrate::foo",
		"malloc":                                 "malloc",
		"_Zbogus":                                "_Zbogus",
	} {
		if got := demangleName(in); got != want {
			t.Errorf("demangle(%q) = %q, want %q", in, got, want)
		}
	}
}
