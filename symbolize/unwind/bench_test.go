package unwind

import (
	"debug/elf"
	"strings"
	"testing"

	"github.com/faultline/faultline/symbolize/internal/cfi"
)

type benchSample struct {
	regs  Regs
	sp    uint64
	stack []byte
}

func loadFixture(tb testing.TB) (*mappings, []benchSample) {
	tb.Helper()
	f, err := elf.Open("testdata/prog")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	tab, err := cfi.Load(f, nil)
	if err != nil {
		tb.Fatal(err)
	}
	pd, err := readTestPerfData("testdata/prog.data")
	if err != nil {
		tb.Fatal(err)
	}
	var maps mappings
	for _, m := range pd.Mmaps {
		if strings.HasSuffix(m.Filename, "/prog") && m.Prot&4 != 0 {
			bias, _ := LoadBias(f, m.Addr, m.Pgoff)
			maps = append(maps, mapping{Start: m.Addr, End: m.Addr + m.Len, Bias: bias, Table: tab})
		}
	}
	var out []benchSample
	for _, s := range pd.Samples {
		r := RegsFromPerf(ArchX86_64, s.RegsMask, s.Regs)
		sp, _ := r.SP(ArchX86_64)
		out = append(out, benchSample{r, sp, s.Stack})
	}
	return &maps, out
}

// BenchmarkUnwind unwinds the fixture's 28 samples (3–18 frames, through a
// signal frame and a thread root) round-robin; steady state must not
// allocate.
func BenchmarkUnwind(b *testing.B) {
	maps, samples := loadFixture(b)
	u := New(ArchX86_64)
	benchUnwind(b, len(samples), func(i int, frames []Frame) []Frame {
		s := &samples[i]
		frames, _ = u.Unwind(s.regs, s.sp, s.stack, maps, nil, frames)
		return frames
	})
}

// benchUnwind runs one(i, frames) over samples 0..n-1 round-robin, reusing
// the frames slice as the unwinder's callers do, and reports frames per op.
func benchUnwind(b *testing.B, n int, one func(i int, frames []Frame) []Frame) {
	frames := make([]Frame, 0, DefaultMaxDepth)
	nframes := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		frames = one(i%n, frames)
		nframes += len(frames)
	}
	b.ReportMetric(float64(nframes)/float64(b.N), "frames/op")
}

// TestUnwindAllocs fails if Unwind allocates in steady state, however many
// samples it has seen.
func TestUnwindAllocs(t *testing.T) {
	maps, samples := loadFixture(t)
	u := New(ArchX86_64)
	frames := make([]Frame, 0, DefaultMaxDepth)
	for _, s := range samples { // warm the row caches
		frames, _ = u.Unwind(s.regs, s.sp, s.stack, maps, nil, frames)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		s := &samples[i%len(samples)]
		i++
		frames, _ = u.Unwind(s.regs, s.sp, s.stack, maps, nil, frames)
	})
	if allocs != 0 {
		t.Errorf("Unwind allocates %v times per call in steady state", allocs)
	}
}
