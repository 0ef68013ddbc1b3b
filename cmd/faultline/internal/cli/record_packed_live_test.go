package cli

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/faultline/faultline/perfdata/schema"
)

// TestRecordInprocLivePacked records churn and the C++ containers program
// twice in-process, packed (the default) and with --per-call-samples:
// the calls of every entry point are equal, analyze finds the same sites
// with the same faults (within the 0.5% the other comparisons allow for
// run-to-run differences), and the packed recording is smaller; stored
// uncompressed, churn's costs at most 24 bytes a call (the calls packed,
// the sampled stacks as samples of their own).
func TestRecordInprocLivePacked(t *testing.T) {
	progs := requireInproc(t)
	for _, argv := range [][]string{{filepath.Join(progs, "churn"), "20000"}, {filepath.Join(progs, "containers")}} {
		t.Run(filepath.Base(argv[0]), func(t *testing.T) {
			dir := t.TempDir()
			packed, perCall := filepath.Join(dir, "packed.data"), filepath.Join(dir, "percall.data")
			for _, run := range []struct {
				out  string
				args []string
			}{{packed, nil}, {perCall, []string{"--per-call-samples"}}} {
				args := append(append([]string{"-q", "--no-thp", "--no-compress", "-o", run.out}, run.args...), "--")
				if code, stderr := runRecordMain(append(args, argv...)...); code != ExitOK {
					t.Fatalf("record %v: exit %d\n%s", run.args, code, stderr)
				}
			}
			if st := readStats(t, packed); st.Packed == 0 || st.Unpacked == 0 {
				t.Fatalf("the default recording has %d packed samples holding %d", st.Packed, st.Unpacked)
			}
			if st := readStats(t, perCall); st.Packed != 0 {
				t.Fatalf("--per-call-samples wrote %d packed samples", st.Packed)
			}
			cp, _, _ := callCounts(t, packed)
			cc, _, _ := callCounts(t, perCall)
			// The page-table snapshots and the peak RSS are not calls; how
			// many snapshots a run takes depends on its timing.
			for _, m := range []map[string]uint64{cp, cc} {
				delete(m, schema.SnapshotEvent)
				delete(m, schema.RSSEvent)
			}
			var calls uint64
			for fn, n := range cc {
				calls += n
				if cp[fn] != n {
					t.Errorf("%s: %d calls packed, %d one by one", fn, cp[fn], n)
				}
			}
			for fn, n := range cp {
				if _, ok := cc[fn]; !ok {
					t.Errorf("%s: %d calls packed, none one by one", fn, n)
				}
			}
			sp, sc := summarySites(t, packed), summarySites(t, perCall)
			if len(sc) == 0 {
				t.Fatal("analyze found no sites in the recording of calls one by one")
			}
			for site, n := range sc {
				if m := sp[site]; math.Abs(float64(m-n)) > siteSlack(site, n) {
					t.Errorf("%s: %d faults packed, %d one by one", site, m, n)
				}
			}
			for site, m := range sp {
				if _, ok := sc[site]; !ok && m > 1 {
					t.Errorf("%s: %d faults packed, no such site one by one", site, m)
				}
			}
			fp, fc := fileSize(t, packed), fileSize(t, perCall)
			t.Logf("%d calls: %d bytes packed (%.1f a call), %d one by one (%.1f)", calls, fp, float64(fp)/float64(calls), fc, float64(fc)/float64(calls))
			if fp >= fc {
				t.Errorf("packed recording %d bytes, one by one %d", fp, fc)
			}
			if filepath.Base(argv[0]) == "churn" && fp > 24*int64(calls) {
				t.Errorf("churn packed: %d bytes for %d calls, more than 24 a call", fp, calls)
			}
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
