package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/perfdata/perftest"
)

// diffFixtures is testdata/diff: two real recordings of one program,
// testdata/diff/src/grow.c, on an input of 20000 lines (small.data) and of
// 60000 (large.data), made by testdata/diff/gen.sh with faultline record.
const diffFixtures = "../../../../testdata/diff"

// analyzeFixture analyzes one recording of testdata/diff to a profile in dir
// with the fixtures' symfs, as a user would before diffing.
func analyzeFixture(t *testing.T, dir, name string) string {
	t.Helper()
	data := perftest.Testdata(t, "diff", name+".data")
	out := filepath.Join(dir, name+".pb.gz")
	// The fixtures' symfs holds only grow: libc (whose CFI unwinds malloc
	// to its caller) comes from this machine, which --symfs-fallback allows.
	code, stdout, stderr := runCLI("analyze", "-q", "--symfs", filepath.Join(diffFixtures, "symfs"), "--symfs-fallback", "-o", out, data)
	if code != ExitOK {
		t.Fatalf("analyze %s: exit %d\nstdout: %s\nstderr: %s", data, code, stdout, stderr)
	}
	if stdout != "" {
		t.Errorf("analyze -q printed %q", stdout)
	}
	return out
}

// siteFaults sums the faults of the allocation sites whose leaf function is fn.
func siteFaults(t *testing.T, path, fn string) int64 {
	t.Helper()
	p := reporttest.Read(t, path)
	var n int64
	for _, s := range p.Sample {
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 && s.Location[0].Line[0].Function.Name == fn {
			n += s.Value[0]
		}
	}
	return n
}

// TestDiffRecordings is diff's acceptance test on real recordings: the same
// program on an input three times larger must fail the diff with the site
// that grew on top; the other way round, or against itself, it must pass.
func TestDiffRecordings(t *testing.T) {
	dir := t.TempDir()
	small := analyzeFixture(t, dir, "small")
	large := analyzeFixture(t, dir, "large")

	// Independent of faultline: index_lines mallocs (lines+1)*8 bytes, which
	// glibc mmaps with a 16-byte header in front, and grow touches every
	// byte with THP off, so its faults are the pages the chunk spans. The
	// input line counts come from gen.sh.
	pages := func(lines int64) int64 { return ((lines+1)*8 + 16 + 4095) / 4096 }
	if got, want := siteFaults(t, small, "index_lines"), pages(20000); got != want {
		t.Errorf("small: index_lines has %d faults, want %d (pages of its chunk)", got, want)
	}
	if got, want := siteFaults(t, large, "index_lines"), pages(60000); got != want {
		t.Errorf("large: index_lines has %d faults, want %d (pages of its chunk)", got, want)
	}

	t.Run("grew", func(t *testing.T) {
		code, out, stderr := runCLI("diff", "--threshold", "10%", small, large)
		if code != ExitRegression {
			t.Fatalf("exit %d, want %d; stderr: %s\n%s", code, ExitRegression, stderr, out)
		}
		if !strings.HasPrefix(stderr, "faultline: REGRESSION: 1 site grew") {
			t.Errorf("stderr %q, want the verdict", stderr)
		}
		// The first row of the site table is the grown site, marked.
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "Sites by absolute change") {
				if i+2 >= len(lines) || !strings.Contains(lines[i+2], "! index_lines grow.c:") {
					t.Errorf("top site is not index_lines, marked:\n%s", out)
				}
				return
			}
		}
		t.Errorf("no site table:\n%s", out)
	})
	t.Run("markdown", func(t *testing.T) {
		code, out, _ := runCLI("diff", "--format", "markdown", small, large)
		if code != ExitRegression || !strings.Contains(out, "| `index_lines grow.c:") || !strings.Contains(out, "**regression**") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("shrank", func(t *testing.T) {
		code, out, stderr := runCLI("diff", "--threshold", "10%", large, small)
		if code != ExitOK || stderr != "" || !strings.Contains(out, "OK: no site grew") {
			t.Errorf("exit %d, want %d; stderr: %s\n%s", code, ExitOK, stderr, out)
		}
	})
	t.Run("same", func(t *testing.T) {
		if code, out, stderr := runCLI("diff", "--threshold", "10%", small, small); code != ExitOK {
			t.Errorf("exit %d; stderr: %s\n%s", code, stderr, out)
		}
	})
	t.Run("not a profile", func(t *testing.T) {
		src := filepath.Join(diffFixtures, "src", "grow.c")
		code, _, stderr := runCLI("diff", small, src)
		if code != ExitFailure || !strings.Contains(stderr, "not a faultline profile") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
	// diff analyzes perf.data inputs itself (without --symfs, so frames are
	// named as this machine allows, the same way in both): the verdict
	// must not change.
	t.Run("perf.data inputs", func(t *testing.T) {
		code, out, stderr := runCLI("diff", filepath.Join(diffFixtures, "small.data"), filepath.Join(diffFixtures, "large.data"))
		if code != ExitRegression {
			t.Errorf("exit %d, want %d; stderr: %s\n%s", code, ExitRegression, stderr, out)
		}
		code, out, stderr = runCLI("diff", filepath.Join(diffFixtures, "large.data"), filepath.Join(diffFixtures, "small.data"))
		if code != ExitOK {
			t.Errorf("reversed: exit %d, want %d; stderr: %s\n%s", code, ExitOK, stderr, out)
		}
	})
}
