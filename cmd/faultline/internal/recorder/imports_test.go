package recorder

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsNoAnalysis: the recorder writes what perfdata/schema names and
// takes nothing from the analysis (attribute/analyze, attribute/report), so recording and analysis
// change apart. The dependencies come from go list, as the build sees them.
func TestImportsNoAnalysis(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the dependencies with")
	}
	out, err := exec.Command(goCmd, "list", "-deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list -deps ./...: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/faultline/faultline/attribute/analyze") || strings.HasPrefix(p, "github.com/faultline/faultline/attribute/report") {
			t.Errorf("the recorder depends on %s", p)
		}
	}
}
