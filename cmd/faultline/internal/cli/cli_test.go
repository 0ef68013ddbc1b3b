package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// helpKnownIssues lists commands whose help departs from the others, and
// how; their departures are logged, not failed.
var helpKnownIssues = map[string]string{}

// TestHelpConsistent checks that every command's help has the same parts, in
// the same order, on standard output with exit status 0, however it is asked for.
func TestHelpConsistent(t *testing.T) {
	if len(commands()) < 5 {
		t.Fatalf("only %d commands registered", len(commands()))
	}
	for _, c := range commands() {
		name := c.name
		errorf := t.Errorf
		var departures []string
		if issue := helpKnownIssues[name]; issue != "" {
			errorf = func(format string, args ...any) { departures = append(departures, fmt.Sprintf(format, args...)) }
			defer func() {
				if len(departures) == 0 {
					t.Errorf("%s: help is consistent now: remove it from helpKnownIssues", name)
					return
				}
				t.Logf("%s: known issue (%s); %d departures, first: %s", name, issue, len(departures), departures[0])
			}()
		}
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}} {
			code, out, errOut := runCLI(args...)
			if code != ExitOK {
				t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
				continue
			}
			if errOut != "" {
				errorf("%v: help also went to stderr", args)
			}
			// Usage line, what it does, a worked example, the flags.
			last := -1
			for _, part := range []string{"Usage: faultline " + name + " ", "\n\n", "\nExample", "\nFlags:\n"} {
				i := strings.Index(out, part)
				if i < 0 || i < last {
					t.Errorf("%v: %q missing or out of order in:\n%s", args, part, out)
					break
				}
				last = i
			}
			if !strings.Contains(out, "\n  faultline "+name+" ") && !strings.Contains(out, "\n  sudo faultline "+name+" ") {
				errorf("%v: no example command line indented by two spaces", args)
			}
			flags := out[strings.Index(out, "\nFlags:\n")+1:]
			if !strings.Contains(flags, "  -h, --help ") {
				errorf("%v: -h, --help not listed", args)
			}
			if strings.Contains(flags, "[=true|false]") {
				errorf("%v: pflag's [=true|false] in the flag list", args)
			}
			for _, l := range strings.Split(out, "\n") {
				// Example command lines may run long; nothing else.
				if len(l) > 80 && !strings.Contains(l, "faultline ") && !strings.Contains(l, "perf ") {
					errorf("%v: line over 80 columns: %q", args, l)
				}
			}
		}
	}
}

func TestTopLevel(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string // substrings; "" = must be empty
	}{
		{nil, ExitFailure, "", "Commands:"},
		{[]string{"--help"}, ExitOK, "Exit status:", ""},
		{[]string{"-h"}, ExitOK, "Commands:", ""},
		{[]string{"help"}, ExitOK, "Commands:", ""},
		{[]string{"help", "help"}, ExitOK, "Commands:", ""},
		{[]string{"help", "nope"}, ExitFailure, "", `unknown command "nope"`},
		{[]string{"help", "info", "diff"}, ExitFailure, "", "help takes one command"},
		{[]string{"--version"}, ExitOK, "faultline " + Version + " (go", ""},
		{[]string{"version"}, ExitOK, "faultline " + Version + " (go", ""},
		{[]string{"-V"}, ExitOK, "faultline " + Version, ""},
		{[]string{"frobnicate"}, ExitFailure, "", `unknown command "frobnicate"`},
		{[]string{"--frobnicate"}, ExitFailure, "", `unknown command "--frobnicate"`},
	} {
		code, out, errOut := runCLI(tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args, code, tc.code)
		}
		for _, c := range []struct{ name, got, want string }{{"stdout", out, tc.stdout}, {"stderr", errOut, tc.stderr}} {
			if c.want == "" && c.got != "" || !strings.Contains(c.got, c.want) {
				t.Errorf("%v: %s %q, want %q", tc.args, c.name, c.got, c.want)
			}
		}
	}
	// Every command is listed, and the exit statuses are documented.
	_, out, _ := runCLI("--help")
	for _, c := range commands() {
		if name := c.name; !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("%s missing from the command list:\n%s", name, out)
		}
	}
	for _, s := range []string{"0  success", "1  diff: a site regressed", "2  bad usage"} {
		if !strings.Contains(out, s) {
			t.Errorf("exit status %q not documented:\n%s", s, out)
		}
	}
}

// TestAnalyzeSelectFlags: --comm and --pid reach the analysis (the counts
// are attribute/analyze's TestSelectPrograms') and the summary says what
// they selected; a pid of 0 is bad usage.
func TestAnalyzeSelectFlags(t *testing.T) {
	data := perftest.Testdata(t, "perf", "forkexec.plain.data")
	symfs := perftest.Testdata(t, "symfs")
	out := filepath.Join(t.TempDir(), "p.pb.gz")
	code, stdout, stderr := runCLI("analyze", "--symfs", symfs, "--comm", "launch", "--comm", "exectarget", "-o", out, data)
	if code != ExitOK || !strings.Contains(stdout, "\nSelected:     --comm launch --comm exectarget: processes ") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI("analyze", "--pid", "0", "-o", out, data); code != ExitFailure || !strings.Contains(stderr, "--pid 0: want a process id") {
		t.Errorf("--pid 0: exit %d, %s", code, stderr)
	}
}
