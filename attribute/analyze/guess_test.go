package analyze

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata/perftest"
)

// A recording cut short has no TRACING_DATA or EVENT_DESC (perf writes them
// after the data): the probes' roles are inferred from their samples, and
// the sites completed before the cut count as in the whole recording
// (expect.tsv: make_table 5+1, make_buckets 7+1, make_index 9+1 -- faults
// after return + the top-header fault inside malloc (in_block) -- all
// before the cut at 1.2 MB of the 1.6 MB file, which falls inside
// make_matrix's touching).
func TestTruncatedRecordingInfersProbes(t *testing.T) {
	data := perftest.ReadTestdata(t, "perf", "basic.plain.data")
	path := filepath.Join(t.TempDir(), "cut.data")
	if err := os.WriteFile(path, data[:1200000], 0o644); err != nil {
		t.Fatal(err)
	}
	res, got := analyzeFixture(t, path, report.ByAlloc)
	for site, want := range map[string]int64{"make_table": 6, "make_buckets": 8, "make_index": 10} {
		var n int64
		for k, v := range got {
			if k.site == site {
				n += v.faults
			}
		}
		if n != want {
			t.Errorf("%s: %d faults, want %d", site, n, want)
		}
	}
	w := fmt.Sprint(res.Summary.Warnings)
	for _, s := range []string{"truncated", "taken as the entry probe of malloc", "taken as the return probe of malloc"} {
		if !strings.Contains(w, s) {
			t.Errorf("warnings lack %q:\n%s", s, w)
		}
	}
	if !res.Summary.Truncated {
		t.Error("summary does not say truncated")
	}
}
