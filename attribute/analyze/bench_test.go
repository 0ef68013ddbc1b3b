package analyze

import (
	"fmt"
	"os"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
)

// BenchmarkAnalyze runs the whole pipeline (decode in time order, unwind,
// attribute, build the profile) over a recording: $ANALYZE_BENCH_FILE (a
// large real recording; binaries from this machine), else two committed
// fixtures: rec=basic (perf record's shape: every call with its stack) and
// rec=leaf (faultline record's: calls without a stack joined to sampled
// stack twins, leaves from the top stack words, caller weights; stacks.go's
// path). Every iteration starts a fresh session, so it includes opening
// and indexing the binaries, which dominates on fixtures this small; the
// per-sample cost is BenchmarkSessionUnwind (symbolize) and
// BenchmarkTracker (attribute). testdata/bench/bench.sh compares the
// command with perf script on large recordings.
func BenchmarkAnalyze(b *testing.B) {
	type rec struct {
		name, path string
		cfg        symbolize.Config
	}
	leafFiles := fixtureFiles
	leafFiles.Symfs = "../../testdata/leaf/symfs"
	recs := []rec{{"basic", "../../testdata/perf/basic.plain.data", fixtureFiles}, {"leaf", "../../testdata/leaf/default.data", leafFiles}}
	if f := os.Getenv("ANALYZE_BENCH_FILE"); f != "" {
		recs = []rec{{"env", f, symbolize.Config{}}}
	}
	for _, rc := range recs {
		fi, err := os.Stat(rc.path)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 2} {
			// workers=1 is the serial loop, 2 the pipeline (on a 2-core
			// machine: GOMAXPROCS walkers).
			b.Run(fmt.Sprintf("rec=%s/workers=%d", rc.name, n), func(b *testing.B) {
				b.SetBytes(fi.Size())
				b.ReportAllocs()
				for b.Loop() {
					r, err := perfdata.Open(rc.path, nil)
					if err != nil {
						b.Fatal(err)
					}
					sess, err := symbolize.NewSession(rc.cfg, r.Meta())
					if err != nil {
						b.Fatal(err)
					}
					res, err := Run(r, sess, Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc, Workers: n})
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Profile.Sample) == 0 {
						b.Fatal("empty profile")
					}
					sess.Close()
					r.Close()
				}
			})
		}
	}
}
