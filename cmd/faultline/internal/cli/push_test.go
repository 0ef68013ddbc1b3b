package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/cmd/faultline/internal/pyroscope/pyroscopetest"
	"github.com/google/pprof/profile"
)

// pushFixture is a committed recording and the symfs its binaries are in.
const (
	pushFixture = "../../../../testdata/perf/basic.pipe.data"
	pushSymfs   = "../../../../testdata/symfs"
)

// TestPushDeliversProfile checks that faultline push sends the
// profile analyze wrote; the official handler receives its bytes unchanged
// (so the same samples) under __name__, the program's service_name and the
// labels given. analyze --push delivers the same bytes as its -o file.
func TestPushDeliversProfile(t *testing.T) {
	srv := pyroscopetest.Start(t)
	dir := t.TempDir()
	prof := filepath.Join(dir, "faults.pb.gz")
	code, _, stderr := runCLI("analyze", "-q", "--symfs", pushSymfs, "-o", prof,
		"--push", srv.URL, "--push-label", "commit=abc123", pushFixture)
	if code != ExitOK {
		t.Fatalf("analyze --push: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI("push", "--url", srv.URL, "--label", "commit=abc123", "--label", "service_name=basic-ci", prof)
	if code != ExitOK || stderr != "" {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	want := reporttest.Parse(t, prof, raw)
	if len(want.Sample) == 0 {
		t.Fatal("the fixture's profile has no samples")
	}
	if !strings.Contains(stdout, "pushed "+strconv.Itoa(len(want.Sample))+" samples") {
		t.Errorf("push said %q", stdout)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d pushes arrived, want 2", len(reqs))
	}
	// The fixture's main binary is testdata/src/basic.c's "basic".
	wantLabels := []string{
		"__name__=faultline,commit=abc123,service_name=basic",
		"__name__=faultline,commit=abc123,service_name=basic-ci",
	}
	for i, req := range reqs {
		if len(req.Series) != 1 || len(req.Series[0].Samples) != 1 {
			t.Fatalf("push %d: %d series", i, len(req.Series))
		}
		if got := pyroscopetest.Labels(req.Series[0]); got != wantLabels[i] {
			t.Errorf("push %d: labels %s, want %s", i, got, wantLabels[i])
		}
		got := req.Series[0].Samples[0].RawProfile
		if !bytes.Equal(got, raw) {
			t.Errorf("push %d: %d bytes arrived, the file has %d", i, len(got), len(raw))
			continue
		}
		p, err := profile.ParseData(got)
		if err != nil || p.String() != want.String() {
			t.Errorf("push %d: received profile differs (%v)", i, err)
		}
	}
}

// TestPushRefusals: bad input is refused before anything is sent, with
// what to do.
func TestPushRefusals(t *testing.T) {
	srv := pyroscopetest.Start(t)
	notProfile := filepath.Join(t.TempDir(), "x.pb.gz")
	os.WriteFile(notProfile, []byte("not a profile"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"push", notProfile}, "--url is required"},
		{[]string{"push", "--url", srv.URL, "--label", "commit", notProfile}, "NAME=VALUE"},
		{[]string{"push", "--url", srv.URL, "--label", "a=1", "--label", "a=2", notProfile}, "given twice"},
		{[]string{"push", "--url", srv.URL, notProfile}, "not a pprof profile"},
		{[]string{"push", "--url", "localhost:4040", notProfile}, "http:// or https://"},
		{[]string{"analyze", "--push", srv.URL, "--push-label", "9x=1", pushFixture}, "label name"},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != ExitFailure || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d pushes arrived", n)
	}
}
