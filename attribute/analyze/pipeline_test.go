package analyze

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
)

// runWorkers analyzes path with n walkers and returns the written profile
// and the summary, warnings sorted: binaries are opened by whichever
// walker reaches them first, so warnings come in any order.
func runWorkers(t *testing.T, path string, mode report.Mode, n int) ([]byte, string) {
	t.Helper()
	r, err := perfdata.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	symfs := filepath.Join(filepath.Dir(path), "symfs") // heapgrow's, diff's, ...
	if _, err := os.Stat(symfs); err != nil {
		symfs = "../../testdata/symfs"
	}
	sess, err := symbolize.NewSession(symbolize.Config{Symfs: symfs, BuildIDDir: "../../testdata/buildid-cache", Getenv: func(string) string { return "" }}, r.Meta())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := Run(r, sess, Options{Attr: attribute.DefaultConfig(), Mode: mode, Workers: n})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := res.Profile.Write(&buf); err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	var warnings []string
	for _, w := range s.Warnings {
		warnings = append(warnings, w.Error())
	}
	slices.Sort(warnings)
	s.Warnings = nil
	join, top := s.StackJoin, s.TopStacks // pointers: compared by value
	s.StackJoin, s.TopStacks = nil, nil
	return buf.Bytes(), fmt.Sprintf("%+v %+v %+v %q", s, join, top, warnings)
}

// TestWorkersSameProfile: every committed recording (file mode, pipe mode,
// compressed, forks and execs, threads, stack-joined range events, leaves
// from entry-probe words) gives
// the same profile bytes and the same summary with 1 walker (the serial
// path), 2, 3 and 8 (the pipeline; 8 only with -short), by alloc and by
// touch. The serial path is
// the reference the other tests check against perf script and the
// expectation tables.
func TestWorkersSameProfile(t *testing.T) {
	files := committedRecordings(t)
	widths := []int{2, 3, 8}
	if testing.Short() {
		widths = []int{8} // more walkers than cores: batches finish out of order
	}
	for _, f := range files {
		for _, mode := range []report.Mode{report.ByAlloc, report.ByTouch} {
			t.Run(fmt.Sprintf("%s/%v", filepath.Base(f), mode), func(t *testing.T) {
				want, wantSum := serialRun(t, f, mode)
				for _, n := range widths {
					got, gotSum := runWorkers(t, f, mode, n)
					if !bytes.Equal(got, want) {
						t.Errorf("%d walkers: profile differs from the serial run's (%d vs %d bytes)", n, len(got), len(want))
					}
					if gotSum != wantSum {
						t.Errorf("%d walkers: summary differs:\n got %s\nwant %s", n, gotSum, wantSum)
					}
				}
			})
		}
	}
}
