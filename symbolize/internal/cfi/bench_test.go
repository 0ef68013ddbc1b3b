package cfi

import (
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// loadTable loads the CFI of the ELF file at path (no separate debug file).
func loadTable(tb testing.TB, path string) *Table {
	tb.Helper()
	tab, err := Load(perftest.OpenELF(tb, path), nil)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return tab
}

func benchTable(b *testing.B) (*Table, []uint64) {
	tab := loadTable(b, "../../unwind/testdata/prog")
	var pcs []uint64
	for _, r := range tab.FDEs() {
		pcs = append(pcs, r.Begin+(r.End-r.Begin)/2)
	}
	return tab, pcs
}

// BenchmarkFind looks up 64 hot PCs round-robin (the steady state of a
// profile: the same return addresses again and again).
func BenchmarkFind(b *testing.B) {
	tab, pcs := benchTable(b)
	hot := pcs[:64]
	var row Row
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := tab.Find(hot[i&63], &row); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFindMiss cycles through the middle of every FDE of a static
// glibc binary (1198 FDEs), so most lookups miss the row cache and
// interpret CFI.
func BenchmarkFindMiss(b *testing.B) {
	tab, pcs := benchTable(b)
	var row Row
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := tab.Find(pcs[i%len(pcs)], &row); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad measures building a Table for a static glibc binary
// (no .eh_frame_hdr, so the FDEs are scanned and sorted).
func BenchmarkLoad(b *testing.B) {
	f := perftest.OpenELF(b, "../../unwind/testdata/prog")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Load(f, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvalPLT(b *testing.B) {
	env := &testEnv{regs: map[uint16]uint64{7: 0x2000, 16: 0x1234}}
	plt := []byte{0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Eval(plt, env, nil)
	}
}
