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
func flatTop(t *testing.T, bin string) ([]string, map[string]int64) {
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
	return names, flat
}

// TestRecordLiveGo: a Go program (no cgo: no malloc) records with exit 0,
// and its profile's top entry is the program's function that faulted
// most (main.grow, whose append copies a slice grown to 8 MiB), not the
// runtime that copied it, and the program's functions hold at least 80%
// of the faults. main.buffer's 8 MiB fault on every page only where the
// collector has not yet returned grow's old arrays for it to reuse (2048
// faults in most runs, 0 in some).
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
	top, flat := flatTop(t, bin)
	var all, program int64
	for name, n := range flat {
		all += n
		if strings.HasPrefix(name, "main.") {
			program += n
		}
	}
	if len(top) == 0 || top[0] != "main.grow" || program*100 < all*80 {
		t.Errorf("top functions %v, the program's %d of %d faults; want main.grow first and at least 80%% in main.*", top, program, all)
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
	if top, _ := flatTop(t, bin); len(top) == 0 || top[0] != "m::build" {
		t.Errorf("top functions %v, want m::build first", top)
	}
}
