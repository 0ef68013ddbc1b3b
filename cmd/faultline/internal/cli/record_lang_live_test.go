package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// namingSrc holds the Go and Rust programs of the live tests below.
const namingSrc = "../../../../testdata/naming/src"

// flatTop records and analyzes bin, and returns the profile's functions
// by flat faults (pprof -top's order: the leaf location's innermost line),
// largest first.
func flatTop(t *testing.T, bin string) []string {
	t.Helper()
	dir := t.TempDir()
	data, pb := filepath.Join(dir, "rec.data"), filepath.Join(dir, "faults.pb.gz")
	if code, errOut := runRecordMain("-q", "-o", data, "--", bin); code != 0 {
		t.Fatalf("record %s: exit %d: %s", bin, code, errOut)
	}
	if code, _, errOut := runCLI("analyze", "-q", "-o", pb, data); code != 0 {
		t.Fatalf("analyze: exit %d: %s", code, errOut)
	}
	f, err := os.Open(pb)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	flat := map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 {
			flat[s.Location[0].Line[0].Function.Name] += s.Value[0]
		}
	}
	var names []string
	for n := range flat {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return flat[names[i]] > flat[names[j]] })
	t.Logf("flat: %v", flat)
	return names
}

// TestRecordLiveGo: a Go program (no cgo: no malloc) records with exit 0,
// and its profile's top entries are the program's functions: the slice
// grown by append (main.grow) and the 8 MiB buffer (main.buffer), not the
// runtime that zeroed or copied them.
func TestRecordLiveGo(t *testing.T) {
	requireLiveRecord(t)
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build testdata/naming/src/goprog")
	}
	bin := filepath.Join(t.TempDir(), "goprog")
	build := exec.Command(goCmd, "build", "-o", bin, ".")
	build.Dir = filepath.Join(namingSrc, "goprog")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	top := flatTop(t, bin)
	if len(top) < 2 || !strings.HasPrefix(top[0], "main.") || !strings.HasPrefix(top[1], "main.") {
		t.Errorf("top functions %v, want the program's (main.grow, main.buffer) first", top)
	}
}

// TestRecordLiveRust: a Rust program's flat top is its own function
// (m::build, whose Vec::push grows a 8 MiB vector), not alloc::alloc::*.
func TestRecordLiveRust(t *testing.T) {
	requireLiveRecord(t)
	rustc, err := exec.LookPath("rustc")
	if err != nil {
		if home, _ := os.UserHomeDir(); home != "" {
			rustc = filepath.Join(home, ".cargo", "bin", "rustc")
		}
		if _, err := os.Stat(rustc); err != nil {
			t.Skip("no rustc in PATH or ~/.cargo/bin to build testdata/naming/src/m.rs")
		}
	}
	bin := filepath.Join(t.TempDir(), "m")
	if out, err := exec.Command(rustc, "-O", "-g", "-o", bin, filepath.Join(namingSrc, "m.rs")).CombinedOutput(); err != nil {
		t.Fatalf("rustc: %v\n%s", err, out)
	}
	if top := flatTop(t, bin); len(top) == 0 || top[0] != "m::build" {
		t.Errorf("top functions %v, want m::build first", top)
	}
}
