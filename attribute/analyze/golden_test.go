package analyze

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/attribute/report/reporttest"
)

var update = flag.Bool("update", false, "rewrite testdata/profiles from this tree's profiles")

// goldenDir holds one text file per committed recording and mode: the
// profile analyze writes for it (`faultline analyze [--by touch] --symfs DIR
// --buildid-dir testdata/buildid-cache REC`), rendered by reporttest.Text
// with one line per sample, so that a failure names the sites that changed.
const goldenDir = "testdata/profiles"

// committedRecordings lists every recording under testdata that analyze
// turns into a profile (testdata/crafted holds hostile inputs that end in
// errors; the bounds tests cover them).
func committedRecordings(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, g := range []string{"../../testdata/perf/*.data", "../../testdata/mixed/*.data", "../../testdata/diff/*.data",
		"../../testdata/heapgrow/*.data", "../../testdata/leaf/*.data"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 27 {
		t.Fatalf("found %d committed recordings, want the 27 under testdata/{perf,mixed,diff,heapgrow,leaf}", len(files))
	}
	return files
}

type serialKey struct {
	path string
	mode report.Mode
}

type serialResult struct {
	profile []byte // gzipped, as written
	summary string
}

// serialRuns memoizes the one-walker analysis that both
// TestWorkersSameProfile and TestProfilesGolden take as the reference.
var serialRuns sync.Map // serialKey -> serialResult

func serialRun(t *testing.T, path string, mode report.Mode) ([]byte, string) {
	t.Helper()
	k := serialKey{path, mode}
	if v, ok := serialRuns.Load(k); ok {
		r := v.(serialResult)
		return r.profile, r.summary
	}
	p, s := runWorkers(t, path, mode, 1)
	serialRuns.Store(k, serialResult{p, s})
	return p, s
}

// goldenFile is the golden file of recording rel (relative to the
// repository) in mode: "perf_basic.allocs.by-alloc.txt" for
// testdata/perf/basic.allocs.data by alloc.
func goldenFile(rel string, mode report.Mode) string {
	name := strings.TrimSuffix(strings.TrimPrefix(rel, "testdata/"), ".data")
	return filepath.Join(goldenDir, strings.ReplaceAll(name, "/", "_")+"."+modeName(mode)+".txt")
}

func modeName(mode report.Mode) string {
	if mode == report.ByTouch {
		return "by-touch"
	}
	return "by-alloc"
}

// TestProfilesGolden: the profile of every committed recording, by alloc
// and by touch, is the one in testdata/profiles, sample for sample. A change
// meant to alter profiles rewrites the files with -update and says why in
// its commit; any other change to a profile fails here, naming the samples
// that changed.
func TestProfilesGolden(t *testing.T) {
	want := map[string]bool{}
	for _, f := range committedRecordings(t) {
		rel := strings.TrimPrefix(filepath.ToSlash(f), "../../")
		for _, mode := range []report.Mode{report.ByAlloc, report.ByTouch} {
			gz, _ := serialRun(t, f, mode)
			p := reporttest.Parse(t, fmt.Sprintf("%s %v", rel, mode), gz)
			path := goldenFile(rel, mode)
			want[filepath.Base(path)] = true
			reporttest.CheckGolden(t, path, "# "+rel+" "+modeName(mode)+"\n"+reporttest.Text(p), *update,
				"go test ./attribute/analyze -run TestProfilesGolden -update")
		}
	}
	have, err := filepath.Glob(filepath.Join(goldenDir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range have {
		if !want[filepath.Base(h)] {
			if *update {
				if err := os.Remove(h); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("%s: no committed recording makes it (-update removes it)", h)
		}
	}
}
