package symbolize_test

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/symtest"
)

// unwindInput returns the recording to unwind: $SYMBOLIZE_BENCH_FILE (a
// large real recording; its binaries are looked up on this machine), else
// the basic fixture with its symfs and build-id cache.
func unwindInput() (path string, cfg symbolize.Config) {
	if f := os.Getenv("SYMBOLIZE_BENCH_FILE"); f != "" {
		return f, symbolize.Config{}
	}
	return "../testdata/perf/basic.plain.data", symbolize.Config{Symfs: "../testdata/symfs", BuildIDDir: "../testdata/buildid-cache", Getenv: func(string) string { return "" }}
}

// loadSamples reads a recording into a session, unwinding every sample
// once in time order (which opens the binaries and fills the caches), and
// returns copies of the samples that have a stack to unwind.
func loadSamples(tb testing.TB, path string, cfg symbolize.Config) (*symbolize.Session, []*perfdata.Sample) {
	tb.Helper()
	r, sess := symtest.Open(tb, path, cfg)
	var smps []*perfdata.Sample
	for r.Next() {
		switch rec := r.Record().(type) {
		case *perfdata.Sample:
			sess.Unwind(rec, false)
			if len(rec.Regs) == 0 {
				continue
			}
			c := *rec
			c.Stack = bytes.Clone(rec.Stack)
			c.Regs = slices.Clone(rec.Regs)
			c.Callchain = slices.Clone(rec.Callchain)
			c.Raw = bytes.Clone(rec.Raw)
			c.Branches, c.BranchCounts, c.RegsIntr, c.Aux, c.Read.Values = nil, nil, nil, nil, nil
			smps = append(smps, &c)
		default:
			sess.Observe(rec)
		}
	}
	if err := r.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(smps) == 0 {
		tb.Fatalf("%s: no samples with user registers", path)
	}
	sess.WaitLoaded() // the binaries' background reads allocate too
	return sess, smps
}

// BenchmarkSessionUnwind measures Session.Unwind per sample in steady
// state: binaries open, CFI rows, locations and stacks cached (the maps are
// those at the end of the recording, which for the fixture are those of
// every sample). Interning and lookups included; naming frames is not.
func BenchmarkSessionUnwind(b *testing.B) {
	path, cfg := unwindInput()
	sess, smps := loadSamples(b, path, cfg)
	var bytes int64
	for _, s := range smps {
		bytes += int64(len(s.Stack))
	}
	b.SetBytes(bytes / int64(len(smps))) // stack bytes per sample
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		sess.Unwind(smps[i], false)
		if i++; i == len(smps) {
			i = 0
		}
	}
}

// TestUnwindSteadyStateAllocs: once a recording's stacks are known,
// unwinding them again allocates nothing, however many samples there are.
func TestUnwindSteadyStateAllocs(t *testing.T) {
	sess, smps := loadSamples(t, "../testdata/perf/basic.plain.data", symbolize.Config{Symfs: "../testdata/symfs", BuildIDDir: "../testdata/buildid-cache", Getenv: func(string) string { return "" }})
	n := testing.AllocsPerRun(3, func() {
		for _, s := range smps {
			sess.Unwind(s, false)
		}
	})
	if n != 0 {
		t.Errorf("unwinding %d known samples again: %v allocations, want 0", len(smps), n)
	}
}
