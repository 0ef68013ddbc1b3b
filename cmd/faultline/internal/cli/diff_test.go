package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/perfdata"
	"github.com/google/pprof/profile"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// The scenario, faults (allocs, bytes) per site:
//
//	site                         BASE           NEW
//	read_input io.c:12 ← main    60+40 (10, 40 KiB)   130 (10, 40 KiB)   +30 = +30%: regression
//	build_index index.c:88       50 (5, 5000 B)       40 (5, 5000 B)     improvement
//	parse_line parse.c:30        4 (2, 64 B)          6 (3, 96 B)        +50% but +2 < 8
//	xmalloc ← old_cache          20 (1, 8 KiB)        -                  vanished
//	xmalloc ← new_table          -                    12 (12, 1200 B)    new, ≥ 8: regression
//	[stack]                      30                   31                 +3.3%
//	total                        204                  219
//
// That is with --key line. By default (--key site) the two xmalloc rows are
// one site, its callers left out: 20 (1, 8 KiB) → 12 (12, 1200 B).
func synthPair(t *testing.T, dir string) (base, head string) {
	t.Helper()
	bp := synthBase(t, 60, 40, 50)
	np := reporttest.Build(t, 0x555555554000, 0x24, "/ci/b/src", []reporttest.Sample{
		{Stack: []reporttest.Frame{reporttest.ReadInput, reporttest.Main}, Flags: []string{"mmap"}, Values: [3]int64{130, 10, 40960}},
		{Stack: []reporttest.Frame{reporttest.BuildIndex, reporttest.Main}, Flags: []string{"zero"}, Values: [3]int64{40, 5, 5000}},
		{Stack: []reporttest.Frame{reporttest.ParseLine, reporttest.Main}, Flags: []string{"fast"}, Values: [3]int64{6, 3, 96}},
		{Stack: []reporttest.Frame{reporttest.XMalloc, reporttest.NewTable, reporttest.Main}, Flags: []string{"fast", "zero"}, Values: [3]int64{12, 12, 1200}},
		{Class: "[stack]", Stack: []reporttest.Frame{reporttest.BuildIndex, reporttest.Main}, Values: [3]int64{31, 0, 0}},
	})
	base, head = filepath.Join(dir, "base.pb.gz"), filepath.Join(dir, "head.pb.gz")
	reporttest.Write(t, base, bp)
	reporttest.Write(t, head, np)
	return base, head
}

// synthBase builds a run of BASE whose two read_input allocations took
// read1 and read2 faults and build_index index faults.
func synthBase(t *testing.T, read1, read2, index int64) *profile.Profile {
	return reporttest.Build(t, 0x400000, 0x10, "/build/a/src", []reporttest.Sample{
		{Stack: []reporttest.Frame{reporttest.ReadInput, reporttest.Main}, Flags: []string{"mmap"}, Values: [3]int64{read1, 6, 24576}},
		{Stack: []reporttest.Frame{reporttest.ReadInput, reporttest.Main}, Flags: []string{"mmap"}, Values: [3]int64{read2, 4, 16384}},
		{Stack: []reporttest.Frame{reporttest.BuildIndex, reporttest.Main}, Flags: []string{"zero"}, Values: [3]int64{index, 5, 5000}},
		{Stack: []reporttest.Frame{reporttest.ParseLine, reporttest.Main}, Flags: []string{"fast"}, Values: [3]int64{4, 2, 64}},
		{Stack: []reporttest.Frame{reporttest.XMalloc, reporttest.OldCache, reporttest.Main}, Values: [3]int64{20, 1, 8192}},
		{Class: "[stack]", Stack: []reporttest.Frame{reporttest.Main}, Values: [3]int64{30, 0, 0}},
	})
}

// synthBase2 writes base2.pb.gz: a second run of BASE in which read_input
// took 130 faults (70+60) instead of 100 and build_index 44 instead of 50;
// the rest as base.pb.gz. Against head.pb.gz (read_input 130), with both
// baselines: BASE 115 (their mean), noise 30 (130-100), delta +15: no
// regression.
func synthBase2(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "base2.pb.gz")
	reporttest.Write(t, path, synthBase(t, 70, 60, 44))
	return path
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, &Env{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

// checkGolden compares got with testdata/name under the package directory
// pkgDir (tests may have changed directory).
func checkGolden(t *testing.T, pkgDir, name, got string) {
	t.Helper()
	path := filepath.Join(pkgDir, "testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

func TestDiffGolden(t *testing.T) {
	wd, _ := os.Getwd()
	dir := t.TempDir()
	synthPair(t, dir)
	synthBase2(t, dir)
	t.Chdir(dir) // relative names in the output
	for _, tc := range []struct {
		golden string
		args   []string
		code   int
	}{
		{"diff/regression.txt", []string{"base.pb.gz", "head.pb.gz"}, ExitRegression},
		{"diff/regression.md", []string{"--format", "markdown", "base.pb.gz", "head.pb.gz"}, ExitRegression},
		{"diff/regression.json", []string{"--format", "json", "base.pb.gz", "head.pb.gz"}, ExitRegression},
		{"diff/top1.md", []string{"--format=markdown", "--top", "1", "base.pb.gz", "head.pb.gz"}, ExitRegression},
		// Loose enough: read_input +30% < 50%, new_table 12 < 13.
		{"diff/ok.txt", []string{"--threshold", "0.5", "--min-delta", "13", "base.pb.gz", "head.pb.gz"}, ExitOK},
		{"diff/alloc_space.txt", []string{"--metric", "alloc_space", "base.pb.gz", "head.pb.gz"}, ExitOK},
		{"diff/allocs.md", []string{"--metric", "allocs", "--format", "markdown", "base.pb.gz", "head.pb.gz"}, ExitRegression},
		{"diff/key-line.txt", []string{"--key", "line", "base.pb.gz", "head.pb.gz"}, ExitRegression},
		// base2.pb.gz: read_input 130, so the baselines' spread (30)
		// covers its growth; the flaky site cannot fail.
		{"diff/bases.md", []string{"--format", "markdown", "base.pb.gz", "base2.pb.gz", "--", "head.pb.gz"}, ExitOK},
		{"diff/bases.txt", []string{"base.pb.gz", "base2.pb.gz", "--", "head.pb.gz"}, ExitOK},
		{"diff/bases.json", []string{"--format", "json", "--base", "base.pb.gz", "--base", "base2.pb.gz", "head.pb.gz"}, ExitOK},
	} {
		t.Run(strings.ReplaceAll(tc.golden, "/", "_"), func(t *testing.T) {
			code, out, errOut := runCLI(append([]string{"diff"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, errOut)
			}
			if tc.code == ExitRegression && !strings.HasPrefix(errOut, "faultline: REGRESSION: ") {
				t.Errorf("stderr = %q, want the verdict", errOut)
			}
			if tc.code == ExitOK && errOut != "" {
				t.Errorf("stderr = %q", errOut)
			}
			checkGolden(t, wd, tc.golden, out)
		})
	}
}

func TestDiffExitCodes(t *testing.T) {
	dir := t.TempDir()
	base, head := synthPair(t, dir)
	junk := filepath.Join(dir, "notes.txt")
	os.WriteFile(junk, []byte("not a profile\n"), 0o644)
	perfData := filepath.Join(dir, "perf.data")
	os.WriteFile(perfData, append([]byte(perfdata.MagicLE), make([]byte, 200)...), 0o644)

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // substring
	}{
		{"regression", []string{base, head}, ExitRegression, "REGRESSION: 1 site grew by more than 10% and by at least 8 faults"},
		{"key line", []string{"--key", "line", base, head}, ExitRegression, "REGRESSION: 2 sites grew by more than 10% and by at least 8 faults"},
		{"bad key", []string{"--key", "stack", base, head}, ExitFailure, `unknown --key "stack"`},
		{"bases", []string{base, base, "--", head}, ExitRegression, "REGRESSION: 1 site grew"},
		{"base flag", []string{"--base", base, "--base", base, head}, ExitRegression, "REGRESSION: 1 site grew"},
		{"base flag and dash", []string{"--base", base, base, "--", head}, ExitRegression, "REGRESSION: 1 site grew"},
		{"two after dash", []string{base, "--", head, head}, ExitFailure, "want one NEW after --, got 2"},
		{"nothing before dash", []string{"--", head}, ExitFailure, "no BASE before --"},
		{"base flag, two more", []string{"--base", base, base, head}, ExitFailure, "with --base, want one more input, NEW; got 2"},
		{"same", []string{base, base}, ExitOK, ""},
		// Reversed, read_input and [stack] improve; build_index (+10) and
		// old_cache (new, 20) stay under a min-delta of 21.
		{"improvement", []string{"--min-delta", "21", head, base}, ExitOK, ""},
		{"min-delta", []string{"--min-delta", "31", base, head}, ExitOK, ""},
		{"threshold percent", []string{"--threshold", "30%", "--min-delta", "13", base, head}, ExitOK, ""},
		{"threshold just under", []string{"--threshold", "29.9%", "--min-delta", "13", base, head}, ExitRegression, "1 site grew"},
		{"no args", nil, ExitFailure, "want two inputs"},
		{"one arg", []string{base}, ExitFailure, "want two inputs"},
		{"three args", []string{base, head, head}, ExitFailure, "several baselines: BASE1 BASE2 ... -- NEW"},
		{"bad flag", []string{"--frobnicate", base, head}, ExitFailure, "unknown flag"},
		{"bad metric", []string{"--metric", "cpu", base, head}, ExitFailure, `unknown --metric "cpu"`},
		{"bad format", []string{"--format", "html", base, head}, ExitFailure, `unknown --format "html"`},
		{"bad threshold", []string{"--threshold", "lots", base, head}, ExitFailure, "invalid threshold"},
		{"ambiguous threshold", []string{"--threshold", "10", base, head}, ExitFailure, "ambiguous threshold"},
		{"negative min-delta", []string{"--min-delta", "-3", base, head}, ExitFailure, "--min-delta"},
		{"missing file", []string{filepath.Join(dir, "nope.pb.gz"), head}, ExitFailure, "nope.pb.gz: no such file"},
		{"not a profile", []string{base, junk}, ExitFailure, "NEW: " + junk + ": not a faultline profile"},
		// perf.data inputs are analyzed on the fly; this one is only a magic.
		{"broken perf.data", []string{perfData, head}, ExitFailure, "BASE: analyzing " + perfData + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(append([]string{"diff"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, errOut)
			}
			if tc.stderr != "" && !strings.Contains(errOut, tc.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tc.stderr)
			}
			if tc.stderr == "" && errOut != "" {
				t.Errorf("stderr = %q, want nothing", errOut)
			}
			if strings.Count(errOut, "\n") > 1 {
				t.Errorf("error is not one line: %q", errOut)
			}
		})
	}
}

// TestDiffPerfDataError checks that a perf.data input analyze cannot read
// fails the diff with an error naming it.
func TestDiffPerfDataError(t *testing.T) {
	dir := t.TempDir()
	_, head := synthPair(t, dir)
	perfData := filepath.Join(dir, "head.data")
	if err := os.WriteFile(perfData, append([]byte(perfdata.MagicBE), make([]byte, 200)...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("diff", perfData, head)
	if code != ExitFailure || !strings.Contains(errOut, "analyzing "+perfData+": ") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestDiffOutputProfile(t *testing.T) {
	dir := t.TempDir()
	base, head := synthPair(t, dir)
	out := filepath.Join(dir, "diff.pb.gz")
	if code, _, errOut := runCLI("diff", "-o", out, base, head); code != ExitRegression {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	p := reporttest.Read(t, out)
	// What pprof -diff_base would show: per leaf function NEW-BASE.
	byLeaf := map[string][3]int64{}
	for _, s := range p.Sample {
		if s.HasLabel("pprof::base", "true") != (s.Value[0] < 0 || s.Value[1] < 0 || s.Value[2] < 0) {
			t.Errorf("sample %v labels %v: base label and sign disagree", s.Value, s.Label)
		}
		leaf := s.Location[0].Line[0].Function.Name
		if leaf == "xmalloc" {
			leaf = s.Location[1].Line[0].Function.Name
		}
		v := byLeaf[leaf]
		for i := range v {
			v[i] += s.Value[i]
		}
		byLeaf[leaf] = v
	}
	want := map[string][3]int64{
		"read_input":  {30, 0, 0},
		"build_index": {-10, 0, 0},
		"parse_line":  {2, 1, 32},
		"old_cache":   {-20, -1, -8192},
		"new_table":   {12, 12, 1200},
		"[stack]":     {1, 0, 0},
	}
	for k, w := range want {
		if byLeaf[k] != w {
			t.Errorf("%s: %v, want %v", k, byLeaf[k], w)
		}
	}
}

func TestDiffHelp(t *testing.T) {
	for _, args := range [][]string{{"diff", "--help"}, {"diff", "-h"}, {"help", "diff"}} {
		code, out, _ := runCLI(args...)
		if code != ExitOK || !strings.Contains(out, "faultline diff --format markdown") || !strings.Contains(out, "--min-delta") {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
}
