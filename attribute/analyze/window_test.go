package analyze

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
)

// total sums a sample type over p's samples.
func total(p *profile.Profile, typ string) int64 {
	vi := report.ValueIndex(p, typ)
	if vi < 0 {
		return 0
	}
	var n int64
	for _, s := range p.Sample {
		n += s.Value[vi]
	}
	return n
}

// timeSpan is the time from the first record of f to its last.
func timeSpan(t *testing.T, f string) uint64 {
	t.Helper()
	r, err := perfdata.Open(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var first, last uint64
	for r.Next() {
		if ts := r.Record().Common().Time; ts > 0 {
			if first == 0 || ts < first {
				first = ts
			}
			last = max(last, ts)
		}
	}
	return last - first
}

// runWindows runs f cut into windows of every ns.
func runWindows(t *testing.T, f string, every uint64, only bool) (*Result, []*Window) {
	t.Helper()
	r, err := perfdata.Open(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	symfs := filepath.Join(filepath.Dir(f), "symfs")
	sess, err := symbolize.NewSession(symbolize.Config{Symfs: symfs, SymfsFallback: true, BuildIDDir: "../../testdata/buildid-cache", Getenv: func(string) string { return "" }}, r.Meta())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var wins []*Window
	res, err := Run(r, sess, Options{Attr: attribute.DefaultConfig(), Workers: 1, Windows: &WindowOptions{Every: every, WindowsOnly: only,
		Emit: func(w *Window) error {
			wins = append(wins, w)
			return nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	return res, wins
}

// TestWindowsAddUp cuts every committed recording into windows of a
// seventh of its span: the windows follow each other
// without gaps, each profile is valid, and their faults, allocations and
// bytes add up to the whole run's profile of the same recording, which
// counts each of them once. With WindowsOnly the windows are the same
// and the run's profile counts none of them.
func TestWindowsAddUp(t *testing.T) {
	for _, f := range committedRecordings(t) {
		for _, parts := range []uint64{7} {
			t.Run(fmt.Sprintf("%s/%d", filepath.Base(f), parts), func(t *testing.T) {
				span := timeSpan(t, f)
				res, wins := runWindows(t, f, max(span/parts, 1), false)
				// The windows start at the first sample, the span at the
				// first record: one window fewer when those differ.
				if span >= parts && (len(wins) < int(parts)-1 || len(wins) > int(parts)+1) {
					t.Errorf("%d windows of a %d ns span cut in %d", len(wins), span, parts)
				}
				var sums [3]int64
				for i, w := range wins {
					if err := w.Profile.CheckValid(); err != nil {
						t.Fatalf("window %d: %v", i, err)
					}
					if i > 0 && w.Start != wins[i-1].End || w.Index != i || w.End < w.Start {
						t.Fatalf("window %d: [%d, %d) after [%d, %d)", i, w.Start, w.End, wins[i-1].Start, wins[i-1].End)
					}
					for j, typ := range []string{report.SampleFaults, report.SampleAllocs, report.SampleAllocSpace} {
						sums[j] += total(w.Profile, typ)
					}
				}
				for j, typ := range []string{report.SampleFaults, report.SampleAllocs, report.SampleAllocSpace} {
					if want := total(res.Profile, typ); sums[j] != want {
						t.Errorf("%s: the %d windows add up to %d, the whole run has %d", typ, len(wins), sums[j], want)
					}
				}
				only, owins := runWindows(t, f, max(span/parts, 1), true)
				for _, typ := range []string{report.SampleFaults, report.SampleAllocs, report.SampleAllocSpace} {
					if n := total(only.Profile, typ); n != 0 {
						t.Errorf("WindowsOnly: the run's profile has %d %s, want none", n, typ)
					}
				}
				if len(owins) != len(wins) {
					t.Fatalf("WindowsOnly: %d windows, %d without", len(owins), len(wins))
				}
				for i := range wins {
					if a, b := owins[i].Profile.String(), wins[i].Profile.String(); a != b {
						t.Errorf("WindowsOnly: window %d differs:\n%s\nwithout:\n%s", i, a, b)
					}
				}
			})
		}
	}
}
