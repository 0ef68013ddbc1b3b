package analyze

import (
	"os"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
)

// BenchmarkAnalyze runs the whole pipeline (decode in time order, unwind,
// attribute, build the profile) over a recording: $ANALYZE_BENCH_FILE (a
// large real recording; binaries from this machine), else the basic
// fixture. Every iteration starts a fresh session, so it includes opening
// and indexing the binaries, which dominates on a fixture this small; the
// per-sample cost is BenchmarkSessionUnwind (symbolize) and
// BenchmarkTracker (attribute). testdata/bench/bench.sh compares the
// command with perf script on large recordings.
func BenchmarkAnalyze(b *testing.B) {
	path := "../../testdata/perf/basic.plain.data"
	cfg := fixtureFiles
	if f := os.Getenv("ANALYZE_BENCH_FILE"); f != "" {
		path, cfg = f, symbolize.Config{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	for b.Loop() {
		r, err := perfdata.Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		sess, err := symbolize.NewSession(cfg, r.Meta())
		if err != nil {
			b.Fatal(err)
		}
		res, err := Run(r, sess, Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Profile.Sample) == 0 {
			b.Fatal("empty profile")
		}
		sess.Close()
		r.Close()
	}
}
