package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
)

func runMain(t *testing.T, stdin []byte, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errb}
	code := Main(args, env)
	return out.String(), errb.String(), code
}

// perfScriptCounts counts samples per event in a perf script text, the
// independent reference testdata/gen.sh wrote next to each recording.
func perfScriptCounts(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	counts := map[string]uint64{}
	for _, s := range perftest.ReadScript(t, path) {
		counts[s.Event]++
	}
	return counts
}

func checkInfoJSON(t *testing.T, out string, want map[string]uint64) *infoReport {
	t.Helper()
	var rep infoReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	got := map[string]uint64{}
	for _, e := range rep.Events {
		if e.Samples > 0 {
			got[e.Name] = e.Samples
		}
	}
	if len(got) != len(want) {
		t.Fatalf("events %v, perf script counted %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("event %s: %d samples, perf script counted %d (all: %v vs %v)", k, got[k], v, got, want)
		}
	}
	return &rep
}

func TestInfoFixtures(t *testing.T) {
	files := perftest.Glob(t, "perf/*.data")
	for _, f := range files {
		script := strings.TrimSuffix(f, ".data") + ".script.txt"
		if _, err := os.Stat(script); err != nil {
			t.Errorf("committed fixture missing: %v (testdata/gen.sh writes each recording's perf script text)", err)
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := perfScriptCounts(t, script)
			out, stderr, code := runMain(t, nil, "info", "--json", f)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			rep := checkInfoJSON(t, out, want)
			if rep.Hostname == "" || rep.PerfVersion == "" || len(rep.Cmdline) == 0 || rep.DurationNs == 0 {
				t.Errorf("missing header facts: %+v", rep)
			}
			if strings.Contains(f, ".z.") && rep.Compression == nil {
				t.Errorf("compression not reported")
			}
			text, stderr, code := runMain(t, nil, "info", f)
			if code != 0 || !strings.Contains(text, "events:") || !strings.Contains(text, "perf  ") {
				t.Fatalf("text: exit %d %s\n%s", code, stderr, text)
			}
			if strings.Contains(f, ".pipe.") {
				p, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				out, stderr, code := runMain(t, p, "info", "--json", "-")
				if code != 0 {
					t.Fatalf("stdin: exit %d: %s", code, stderr)
				}
				checkInfoJSON(t, out, want)
			}
		})
	}
}

func TestInfoErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.data")
	random := filepath.Join(dir, "random.data")
	os.WriteFile(empty, nil, 0o644)
	os.WriteFile(random, bytes.Repeat([]byte("not perf data "), 100), 0o644)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"info", empty}, "is empty (0 bytes), not a perf.data file"},
		{[]string{"info", random}, "is not a perf.data file (bad magic at 0x0)"},
		{[]string{"info", exe}, "is not a perf.data file (bad magic at 0x0; it is an ELF binary)"},
		{[]string{"info", filepath.Join(dir, "missing.data")}, "no such file or directory"},
		{[]string{"info"}, "want one recording"},
		{[]string{"info", "a", "b"}, "want one recording"},
		{[]string{"info", "--nope", "a"}, "unknown flag"},
		{[]string{"info", "-"}, "standard input"},
	} {
		_, stderr, code := runMain(t, []byte("garbage garbage garbage"), tc.args...)
		if code != ExitFailure {
			t.Errorf("%v: exit %d, want %d", tc.args, code, ExitFailure)
		}
		if !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: stderr %q, want one line containing %q", tc.args, stderr, tc.want)
		}
	}
}

func TestInfoHelp(t *testing.T) {
	out, _, code := runMain(t, nil, "info", "--help")
	if code != 0 || !strings.Contains(out, "Example") || !strings.Contains(out, "faultline info --json") {
		t.Fatalf("help: exit %d\n%s", code, out)
	}
	out, _, _ = runMain(t, nil, "--help")
	if !strings.Contains(out, "info ") {
		t.Fatalf("info missing from the command list:\n%s", out)
	}
}

// TestInfoLabelsOldRecording: a recording made before record named its
// stack instances has three events called faultline_12493:malloc (perf
// evlist -v: sample_type without stacks and period 1; with
// CALLCHAIN|REGS_USER|STACK_USER and period 1; the same with period 61) and
// two called dummy:u; info labels every event distinctly.
func TestInfoLabelsOldRecording(t *testing.T) {
	path := perftest.Testdata(t, "leaf", "default.data")
	out, _, code := runMain(t, nil, "info", "--json", path)
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	var rep infoReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var malloc []string
	for _, e := range rep.Events {
		if seen[e.Label] {
			t.Errorf("label %q twice", e.Label)
		}
		seen[e.Label] = true
		if e.Name == "faultline_12493:malloc" {
			malloc = append(malloc, e.Label)
		}
	}
	want := "faultline_12493:malloc|faultline_12493:malloc [stack]|faultline_12493:malloc [stack, 1 in 61]"
	if strings.Join(malloc, "|") != want || !seen["dummy:u"] || !seen["dummy:u #2"] {
		t.Errorf("malloc labels %q, want %q; all %v", malloc, want, seen)
	}
	text, _, _ := runMain(t, nil, "info", path)
	if !strings.Contains(text, "  faultline_12493:malloc [stack, 1 in 61]\n") {
		t.Errorf("text lacks the label:\n%s", text)
	}
}

// TestEventLabels: names that are unique stay as they are (record's
// stack instances have names of their own); two instances of one event
// without stacks are numbered.
func TestEventLabels(t *testing.T) {
	stack := perfdata.SampleFormat(perfdata.SampleCallchain | perfdata.SampleRegsUser | perfdata.SampleStackUser)
	evs := []*perfdata.Event{
		{Name: "faultline_7:malloc", Attr: perfdata.Attr{SamplePeriod: 1}},
		{Name: "faultline_7:malloc/stack-big/", Attr: perfdata.Attr{SamplePeriod: 1, SampleType: stack}},
		{Name: "faultline_7:malloc/stack-1in61/", Attr: perfdata.Attr{SamplePeriod: 61, SampleType: stack}},
		{Name: "page-faults:u", Attr: perfdata.Attr{SamplePeriod: 1}},
		{Name: "page-faults:u", Attr: perfdata.Attr{SamplePeriod: 1}},
		{Name: "cycles", Attr: perfdata.Attr{SamplePeriod: 4000, Flags: perfdata.AttrFreq, SampleType: stack}},
		{Name: "cycles", Attr: perfdata.Attr{SamplePeriod: 1}},
	}
	got := strings.Join(eventLabels(evs), "|")
	want := "faultline_7:malloc|faultline_7:malloc/stack-big/|faultline_7:malloc/stack-1in61/|page-faults:u|page-faults:u #2|cycles [stack]|cycles"
	if got != want {
		t.Errorf("labels\n%s\nwant\n%s", got, want)
	}
}
