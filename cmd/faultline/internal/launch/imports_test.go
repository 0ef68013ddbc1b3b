package launch

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsEarly: package launch and package perfwarm depend on nothing
// that package os and os/signal do not (golang.org/x/sys/unix or
// encoding/binary would be initialized first, with the packages sorted
// before them: about 2 ms more before the guard or the launcher starts
// its work, or before perfwarm's event opens). The dependencies come from
// go list, as the build sees them.
func TestImportsEarly(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the dependencies with")
	}
	deps := func(pkgs ...string) map[string]bool {
		out, err := exec.Command(goCmd, append([]string{"list", "-deps"}, pkgs...)...).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", strings.Join(pkgs, " "), err)
		}
		m := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			m[p] = true
		}
		return m
	}
	early := deps("os", "os/signal")
	for _, pkg := range []string{"github.com/faultline/faultline/cmd/faultline/internal/launch", "github.com/faultline/faultline/cmd/faultline/internal/perfwarm"} {
		for p := range deps(pkg) {
			if !early[p] && p != pkg {
				t.Errorf("%s depends on %s, which os and os/signal do not", pkg, p)
			}
		}
	}
}
