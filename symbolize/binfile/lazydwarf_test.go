package binfile

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// eagerDWARF indexes b's debug file the way it is done without
// .debug_aranges: every section inflated, every unit indexed by its own
// ranges (newDWARFIndex).
func eagerDWARF(t *testing.T, b *Binary) *dwarfIndex {
	t.Helper()
	d, line, _, err := dwarfData(b.dbg, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, err := newDWARFIndex(b.dbg.path, d)
	if err != nil {
		t.Fatal(err)
	}
	x.line, x.order = line, b.dbg.ef.ByteOrder
	return x
}

// TestLazyDWARFSameAsEager: glibc's debug files (libc, ld.so) are indexed
// from .debug_aranges and read a unit at a time; the index (ranges and the
// units they name) and every 31st address of .text name the same frames
// as indexing every unit by its own DIE, and no unit disagreed with
// .debug_aranges (which would make the index read every unit).
func TestLazyDWARFSameAsEager(t *testing.T) {
	l, _ := testSymfs(t)
	for _, path := range []string{libcPath, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"} {
		b, err := l.Open(path, "")
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if b.dw == nil || b.dw.lazy == nil {
			t.Fatalf("%s: DWARF not indexed lazily (warnings %q)", path, b.Warnings)
		}
		eager := eagerDWARF(t, b)
		if len(b.dw.cus) != len(eager.cus) {
			t.Fatalf("%s: %d ranges from .debug_aranges, %d from the units", path, len(b.dw.cus), len(eager.cus))
		}
		for i, s := range b.dw.cus {
			e := eager.cus[i]
			// The lazy index knows a unit by its header's offset, the
			// other by its DIE's: 11 (DWARF 4) or 12 (DWARF 5) bytes on.
			hdr := eager.units[e.node].off - b.dw.units[s.node].off
			if s.lo != e.lo || s.hi != e.hi || hdr != 11 && hdr != 12 {
				t.Fatalf("%s: range %d: [%#x,%#x) of unit %#x, want [%#x,%#x) of unit %#x", path, i,
					s.lo, s.hi, b.dw.units[s.node].off, e.lo, e.hi, eager.units[e.node].off)
			}
		}
		lazy := b.dw
		addrs := sampleText(t, b.ELF(), 31)
		var got, want []Frame
		read := 0
		for _, a := range addrs {
			b.dw = lazy
			got = b.Symbolize(a, got[:0])
			b.dw = eager
			want = b.Symbolize(a, want[:0])
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %#x: lazy %v, every unit %v", path, a, got, want)
			}
		}
		b.dw = lazy
		for _, u := range lazy.units {
			if u.state != 0 {
				read++
			}
		}
		if lazy.lazy == nil {
			t.Errorf("%s: a unit disagreed with .debug_aranges; every unit was read", path)
		}
		t.Logf("%s: %d addresses, %d of %d units read, %s", path, len(addrs), read, len(lazy.units), fmt.Sprint(lazy))
	}
}

// TestSortByStart: the radix sort orders symbols as a stable sort by start
// does (slices.SortStableFunc), duplicates in their original order, on
// random starts sharing high bytes and on many equal ones.
func TestSortByStart(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 100, 5000} {
		syms := make([]elfSym, n)
		for i := range syms {
			syms[i] = elfSym{start: 0x400000 + rng.Uint64N(uint64(n/3+1))*16, name: fmt.Sprint(i)}
			if i%7 == 0 {
				syms[i].start = 1<<40 + rng.Uint64N(1<<20)
			}
		}
		want := slices.Clone(syms)
		slices.SortStableFunc(want, func(a, b elfSym) int { return cmp.Compare(a.start, b.start) })
		sortByStart(syms)
		if !reflect.DeepEqual(syms, want) {
			t.Fatalf("%d symbols: radix order differs from a stable sort", n)
		}
	}
}

// TestLazyDWARFFallbacks: on the C++ fixture (one unit with nine ranges,
// readelf --debug-dump=aranges), the lazy index, the index of every unit
// when the file has no .debug_aranges (the section renamed), and the one
// rebuilt when .debug_aranges disagrees with the unit (the first range one
// byte longer) name every byte of .text alike.
func TestLazyDWARFFallbacks(t *testing.T) {
	data := readFixture(t, "cxx")
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	ar := ef.Section(".debug_aranges")
	shstr := ef.Sections[binary.LittleEndian.Uint16(data[0x3e:])] // e_shstrndx
	if ar == nil || ar.Flags&elf.SHF_COMPRESSED != 0 {
		t.Fatal("testdata/cxx: no uncompressed .debug_aranges")
	}
	noAranges := bytes.Clone(data)
	names := noAranges[shstr.Offset : shstr.Offset+shstr.Size]
	i := bytes.Index(names, []byte(".debug_aranges\x00"))
	if i < 0 {
		t.Fatal("no .debug_aranges in .shstrtab")
	}
	names[i+len(".debug_arange")] = 'z'
	mismatch := bytes.Clone(data)
	// The first tuple follows the 12-byte set header padded to 16; its
	// length is the second 8 bytes.
	lenAt := ar.Offset + 16 + 8
	binary.LittleEndian.PutUint64(mismatch[lenAt:], binary.LittleEndian.Uint64(mismatch[lenAt:])+1)

	open := func(d []byte) *Binary {
		b, err := (&Locator{FS: memFS{"/x": d}}).Open("/x", "")
		if err != nil || b.dw == nil {
			t.Fatalf("open: %v, warnings %q", err, b.Warnings)
		}
		return b
	}
	ref := open(data)
	defer ref.Close()
	if ref.dw.lazy == nil {
		t.Fatal("testdata/cxx not indexed lazily")
	}
	eager := eagerDWARF(t, ref)
	text := ef.Section(".text")
	for _, tc := range []struct {
		name     string
		data     []byte
		wantLazy bool // still lazy after every address was asked for
	}{{"lazy", data, true}, {"no .debug_aranges", noAranges, false}, {"disagreeing .debug_aranges", mismatch, false}} {
		b := open(tc.data)
		defer b.Close()
		if tc.name == "no .debug_aranges" && b.dw.lazy != nil {
			t.Errorf("%s: indexed lazily", tc.name)
		}
		var got, want []Frame
		for a := text.Addr; a < text.Addr+text.Size; a++ {
			got = b.Symbolize(a, got[:0])
			ref.dw, eager = eager, ref.dw
			want = ref.Symbolize(a, want[:0])
			ref.dw, eager = eager, ref.dw
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %#x: %v, every unit %v", tc.name, a, got, want)
			}
		}
		if lazy := b.dw.lazy != nil; lazy != tc.wantLazy {
			t.Errorf("%s: lazy %v after all lookups, want %v", tc.name, lazy, tc.wantLazy)
		}
	}
}
