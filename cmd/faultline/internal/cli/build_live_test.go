package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// builds holds what the live tests build (the record programs, faultline
// binaries, allocator test programs) once per test process: every
// repetition of -count and every test that needs one shares it. Nothing
// built here is written to afterwards; a test that changes a binary
// builds its own.
var builds struct {
	sync.Mutex
	dir  string // made on first use, removed by removeBuilds
	made map[string]*built
}

type built struct {
	once sync.Once
	path string
	err  error
}

// buildOnce returns the path of the artifact name, made by running the
// command that command(path) returns the first time any test asks for it.
// A failed build fails every test that asks, with the same error: the
// command line and its output.
func buildOnce(t *testing.T, name string, command func(path string) *exec.Cmd) string {
	t.Helper()
	builds.Lock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "faultline-cli-live-")
		if err != nil {
			builds.Unlock()
			t.Fatal(err)
		}
		builds.dir, builds.made = dir, map[string]*built{}
	}
	b := builds.made[name]
	if b == nil {
		b = &built{path: filepath.Join(builds.dir, name)}
		builds.made[name] = b
	}
	builds.Unlock()
	b.once.Do(func() {
		c := command(b.path)
		if out, err := c.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("%s: %v\n%s", strings.Join(c.Args, " "), err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("building %s: %v", name, b.err)
	}
	return b.path
}

// removeBuilds removes what buildOnce made; TestMain calls it after the
// tests.
func removeBuilds() {
	builds.Lock()
	defer builds.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
}
