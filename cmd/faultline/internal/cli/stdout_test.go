package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/faultline/faultline/perfdata/perftest"
)

// TestOutputDashIsOnlyTheProfile: with -o -,
// standard output carries the profile alone (google/pprof's parser reads
// it whole) and the summary or report moves to standard error.
func TestOutputDashIsOnlyTheProfile(t *testing.T) {
	base, head := synthPair(t, t.TempDir())
	for _, c := range []struct {
		name    string
		args    []string
		summary string
	}{
		{"analyze", []string{"analyze", "--symfs", "../../../../testdata/symfs", "-o", "-", perftest.Testdata(t, "perf", "basic.z.data")}, "Top allocation sites by faults:"},
		{"correlate", []string{"correlate", "--maps", filepath.Join(correlateData, "access.tt.log.maps"), "--symfs", filepath.Join(correlateData, "symfs"),
			"-o", "-", filepath.Join(correlateData, "access.tt.log"), filepath.Join(correlateData, "faults.trace")}, "matched by ip+page:"},
		{"diff", []string{"diff", "-o", "-", base, head}, "total"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(c.args, &Env{Stdout: &stdout, Stderr: &stderr})
		if code != ExitOK && !(c.name == "diff" && code == ExitRegression) {
			t.Errorf("%s: exit %d\n%s", c.name, code, stderr.String())
			continue
		}
		p, err := profile.Parse(bytes.NewReader(stdout.Bytes()))
		if err != nil {
			t.Errorf("%s -o -: standard output is not a profile alone: %v (starts %q)", c.name, err, stdout.Bytes()[:min(40, stdout.Len())])
		} else if len(p.Sample) == 0 {
			t.Errorf("%s -o -: the profile has no samples", c.name)
		}
		if !strings.Contains(stderr.String(), c.summary) {
			t.Errorf("%s -o -: standard error lacks the summary (%q):\n%s", c.name, c.summary, stderr.String())
		}
	}
	if code, _, stderr := runCLI("correlate", "--pairs", "-", "-o", "-", "a", "b"); code != ExitFailure || !strings.Contains(stderr, "both write to standard output") {
		t.Errorf("--pairs - -o -: exit %d, %q", code, stderr)
	}
}
