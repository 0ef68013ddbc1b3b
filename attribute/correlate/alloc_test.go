package correlate

import (
	"bytes"
	"strings"
	"testing"
)

// repeatLog makes an access log of n copies of the fixture's accesses.
func repeatLog(t testing.TB, n int) []byte {
	acc := fixture(t, "access.tt.log")
	acc = acc[:bytes.LastIndex(acc, []byte("#eof"))]
	return bytes.Repeat(acc, n)
}

// Matching allocates per fault, never per access: reading 50 times the
// accesses costs the same allocations as reading them twice. (Twice, not
// once: a repeated log steps back in time, which costs one warning.)
func TestAllocsDoNotGrowWithAccesses(t *testing.T) {
	log := readFtraceFixture(t, "faults.trace")
	allocs := func(copies int) float64 {
		acc := repeatLog(t, copies)
		return testing.AllocsPerRun(3, func() {
			if _, err := Run(log, bytesSource(acc), Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	// 48 more copies of the log are thousands of accesses: an allocation
	// per access (or per copy) shows as far more than the few that a
	// slice's growth or the runtime's timing can add between two runs
	// (seen: 263 against 264).
	two, fifty := allocs(2), allocs(50)
	if fifty > two+4 {
		t.Errorf("allocations grow with the access log: %v for two copies, %v for 50", two, fifty)
	}
}

func TestAccessReaderAllocs(t *testing.T) {
	acc := repeatLog(t, 20)
	var n int
	allocs := testing.AllocsPerRun(3, func() {
		ar := newAccessReader(bytes.NewReader(acc))
		n = 0
		for ar.Next() {
			n++
		}
	})
	// NewAccessReader: the reader and its buffer.
	if allocs > 3 {
		t.Errorf("%v allocations for %d accesses", allocs, n)
	}
}

func BenchmarkAccessReader(b *testing.B) {
	acc := repeatLog(b, 200)
	b.SetBytes(int64(len(acc)))
	b.ReportAllocs()
	for b.Loop() {
		ar := newAccessReader(bytes.NewReader(acc))
		for ar.Next() {
		}
	}
}

func BenchmarkRun(b *testing.B) {
	log, err := ReadFtrace(bytes.NewReader(fixture(b, "faults.trace")), FaultFilter{})
	if err != nil {
		b.Fatal(err)
	}
	acc := repeatLog(b, 200)
	b.SetBytes(int64(len(acc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Run(log, bytesSource(acc), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// Property: an error, or accesses that print without panicking.
func FuzzAccessLog(f *testing.F) {
	f.Add(fixture(f, "access.tt.log")[:400])
	f.Add(fixture(f, "access.plain.log")[:300])
	f.Add([]byte("1.5: 7: 0x10: R 0x20 8 0x0\n#eof\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ar := newAccessReader(bytes.NewReader(b))
		var sb strings.Builder
		for ar.Next() {
			a := ar.Access()
			sb.WriteString(accessType(a))
			sb.Write(appendSeconds(nil, a.Time))
		}
		_ = ar.Err()
	})
}

// Property: an error, or faults that match and write without panicking.
func FuzzFtrace(f *testing.F) {
	f.Add(fixture(f, "faults.trace")[:2000], []byte("0x1: R 0x2\n"))
	f.Add(fixture(f, "faults.tracecmd")[:2000], fixture(f, "access.tt.log")[:300])
	f.Fuzz(func(t *testing.T, trace, acc []byte) {
		log, err := ReadFtrace(bytes.NewReader(trace), FaultFilter{})
		if err != nil {
			return
		}
		res, err := Run(log, bytesSource(acc), Options{})
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := WritePairs(&buf, res); err != nil {
			t.Fatal(err)
		}
		WriteSummary(&buf, res, log)
		if err := Profile(res, nil).CheckValid(); err != nil {
			t.Fatal(err)
		}
	})
}
