package binfile

import (
	"testing"
)

// benchAddrs returns every 97th byte of b's .text: mostly distinct
// functions, so the first pass reads most compile units.
func benchAddrs(b testing.TB, bin *Binary) []uint64 {
	return sampleText(b, bin.ELF(), 97)
}

// BenchmarkSymbolize measures steady-state lookups (units already read),
// per address, on libc when testdata/symfs (or FAULTLINE_TEST_SYMFS) has
// it, else on the C++ fixture.
func BenchmarkSymbolize(b *testing.B) {
	for _, which := range []string{"cxx", "libc"} {
		b.Run(which, func(b *testing.B) {
			var bin *Binary
			if which == "libc" {
				bin = openLibc(b)
			} else {
				bin = openFixture(b, "cxx")
			}
			defer bin.Close()
			addrs := benchAddrs(b, bin)
			out := make([]Frame, 0, 16)
			for _, a := range addrs { // warm up: read every unit once
				out = bin.Symbolize(a, out[:0])
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				out = bin.Symbolize(addrs[i%len(addrs)], out[:0])
			}
		})
	}
}

// BenchmarkOpenLibc measures Open alone ("open") and Open plus the first
// lookup of every 97th address of .text, which reads nearly every compile
// unit ("open+units"): the cold cost a run pays once per binary.
func BenchmarkOpenLibc(b *testing.B) {
	for _, all := range []bool{false, true} {
		name := "open"
		if all {
			name = "open+units"
		}
		b.Run(name, func(b *testing.B) {
			l, _ := testSymfs(b)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				bin, err := l.Open(libcPath, "")
				if err != nil {
					b.Fatal(err)
				}
				if i == 0 && !bin.hasDWARF() {
					b.Skip("no libc debug file")
				}
				if all {
					out := make([]Frame, 0, 16)
					for _, a := range benchAddrs(b, bin) {
						out = bin.Symbolize(a, out[:0])
					}
				}
				bin.Close()
			}
		})
	}
}

// TestSymbolizeAllocs: once a unit is read, a lookup allocates nothing
// (names are resolved and demangled once).
func TestSymbolizeAllocs(t *testing.T) {
	bin := openFixture(t, "cxx")
	defer bin.Close()
	bin.settle() // the background reads allocate too
	addrs := benchAddrs(t, bin)
	out := make([]Frame, 0, 16)
	for _, a := range addrs {
		out = bin.Symbolize(a, out[:0])
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		out = bin.Symbolize(addrs[i%len(addrs)], out[:0])
		i++
	}); n != 0 {
		t.Errorf("%v allocations per warm lookup, want 0", n)
	}
}
