package perfdata

import (
	"os"
	"path/filepath"
	"testing"
)

// dwarfSynth builds a recording shaped like perf record --call-graph dwarf
// output: n samples with 8 KiB stacks and 17 registers, a FINISHED_ROUND
// every 64 samples.
func dwarfSynth(n int) []byte {
	s := newSynth(false)
	st := SampleFormat(SampleIdentifier | SampleIP | SampleTID | SampleTime | SampleAddr | SampleCPU |
		SamplePeriod | SampleCallchain | SampleRaw | SampleRegsUser | SampleStackUser | SampleDataSrc)
	s.addEvent(Attr{Type: TypeTracepoint, Config: 1, SampleType: st, Flags: AttrSampleIDAll, SampleRegsUser: 0xff0fff, SampleStackUser: 8192}, "probe_libc:malloc", 1)
	s.addEvent(Attr{Type: TypeSoftware, Config: 2, SampleType: st &^ (SampleRaw | SampleCPU | SamplePeriod), Flags: AttrSampleIDAll | AttrExcludeKernel, SampleRegsUser: 0xff0fff, SampleStackUser: 8192}, "page-faults:u", 2)
	stack := make([]byte, 8192)
	regs := make([]uint64, 20)
	for i := 0; i < n; i++ {
		x := &Sample{IP: 0x401000, Addr: uint64(i) * 4096, Period: 1,
			Callchain: []uint64{ContextKernel, 0xffffffff81000000, 0xffffffff81000100},
			Raw:       make([]byte, 28), RegsABI: 2, Regs: regs, Stack: stack[:4000+i%4000], StackSize: 8192}
		x.Pid, x.Tid, x.Time = 100, 100, uint64(1e9+i*1000)
		s.sample(i%2, x)
		if i%64 == 63 {
			s.finishedRound()
		}
	}
	return s.file()
}

// benchInput returns a DWARF recording: $PERFDATA_BENCH_FILE, a fixture
// when there is one, else a synthetic one.
func benchInput(b testing.TB) (string, int64) {
	if f := os.Getenv("PERFDATA_BENCH_FILE"); f != "" {
		fi, err := os.Stat(f)
		if err != nil {
			b.Fatal(err)
		}
		return f, fi.Size()
	}
	for _, pat := range []string{"../testdata/big/*.data", "../testdata/perf/basic.plain.data"} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			if fi, err := os.Stat(m[0]); err == nil {
				return m[0], fi.Size()
			}
		}
	}
	p := dwarfSynth(2000)
	path := filepath.Join(b.TempDir(), "dwarf.data")
	if err := os.WriteFile(path, p, 0o644); err != nil {
		b.Fatal(err)
	}
	return path, int64(len(p))
}

func BenchmarkDecode(b *testing.B) {
	for _, order := range []struct {
		name string
		o    Order
	}{{"time", TimeOrder}, {"file", FileOrder}} {
		b.Run(order.name, func(b *testing.B) {
			path, size := benchInput(b)
			b.SetBytes(size)
			b.ReportAllocs()
			r, err := Open(path, &Options{Order: order.o})
			if err != nil {
				b.Fatal(err)
			}
			r.Close()
			b.ResetTimer()
			for b.Loop() {
				r, err := Open(path, &Options{Order: order.o})
				if err != nil {
					b.Fatal(err)
				}
				for r.Next() {
					if s, ok := r.Record().(*Sample); ok && len(s.Stack) > 1<<20 {
						b.Fatal("impossible")
					}
				}
				if r.Err() != nil {
					b.Fatal(r.Err())
				}
				r.Close()
			}
		})
	}
}

// decodeCountAllocs decodes p once and returns the allocations made while
// iterating (not while opening).
func decodeAllocs(t *testing.T, path string, order Order, stream bool) float64 {
	var r *Reader
	return testing.AllocsPerRun(3, func() {
		var err error
		if stream {
			f, ferr := os.Open(path)
			if ferr != nil {
				t.Fatal(ferr)
			}
			defer f.Close()
			r, err = NewStream(f, &Options{Order: order})
		} else {
			r, err = Open(path, &Options{Order: order})
		}
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		r.Close()
	})
}

// TestAllocsDoNotGrow fails when decoding allocates per record: decoding
// 2N samples must not allocate much more than decoding N.
func TestAllocsDoNotGrow(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	write := func(name string, n int, compress bool, pipe bool) string {
		s := newSynthDWARF(n)
		if compress {
			s.compress([]int{s.data.Len() / 3, s.data.Len() / 2}, false)
		}
		p := s.file()
		if pipe {
			p = s.pipe()
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, p, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name           string
		compress, pipe bool
	}{{"file", false, false}, {"zstd", true, false}, {"pipe", false, true}} {
		small := write(tc.name+"1.data", 1000, tc.compress, tc.pipe)
		big := write(tc.name+"2.data", 2000, tc.compress, tc.pipe)
		for _, order := range []Order{TimeOrder, FileOrder} {
			streams := []bool{false}
			if tc.pipe {
				streams = append(streams, true)
			}
			for _, stream := range streams {
				a1 := decodeAllocs(t, small, order, stream)
				a2 := decodeAllocs(t, big, order, stream)
				t.Logf("%s order=%d stream=%v: %v allocs for 1000 samples, %v for 2000", tc.name, order, stream, a1, a2)
				// Growing slices (pending queue) may add a few; per-record
				// allocation would add >= 1000.
				if a2-a1 > 50 {
					t.Errorf("%s order=%d stream=%v: allocations grow with records: %v for 1000, %v for 2000", tc.name, order, stream, a1, a2)
				}
			}
		}
	}
}

func newSynthDWARF(n int) *synth {
	p := dwarfSynth(n)
	// Rebuild a synth holding the same data, so callers can compress it.
	s := newSynth(false)
	r, err := New(bytesReader(p), int64(len(p)), nil)
	if err != nil {
		panic(err)
	}
	for _, ev := range r.Events() {
		s.addEvent(ev.Attr, ev.Name, ev.IDs...)
	}
	r.Close()
	off := s.bo.Uint64(p[40:])
	size := s.bo.Uint64(p[48:])
	s.data.Write(p[off : off+size])
	return s
}
