package cli

import (
	"path/filepath"
	"testing"
)

// TestScriptJobsSameOutput: script prints the same bytes, warnings
// aside, with one walker (the serial loop) as with 2 and 8 (the pipeline;
// 8 only with -short) on every committed recording: file, pipe and
// compressed, forks, threads, stack-joined range events.
func TestScriptJobsSameOutput(t *testing.T) {
	files, err := filepath.Glob("../../../../testdata/perf/*.data")
	if err != nil {
		t.Fatal(err)
	}
	mixed, _ := filepath.Glob("../../../../testdata/mixed/*.data")
	files = append(files, mixed...)
	if len(files) < 20 {
		t.Fatalf("found %d committed recordings, want the 21 under testdata/{perf,mixed}", len(files))
	}
	jobs := []string{"2", "8"}
	if testing.Short() {
		jobs = jobs[1:] // more walkers than cores: batches finish out of order
	}
	for _, f := range files {
		args := func(j string) []string {
			return []string{"script", "-j", j, "--symfs", "../../../../testdata/symfs", "--buildid-dir", "../../../../testdata/buildid-cache", f}
		}
		code, want, errOut := runCLI(args("1")...)
		if code != ExitOK || len(want) == 0 {
			t.Fatalf("%s: exit %d, %d bytes out, stderr %s", f, code, len(want), errOut)
		}
		for _, j := range jobs {
			if code, got, errOut := runCLI(args(j)...); code != ExitOK || got != want {
				t.Errorf("%s: -j %s: exit %d, output differs from -j 1's (%d vs %d bytes); stderr %s", filepath.Base(f), j, code, len(got), len(want), errOut)
			}
		}
	}
}
