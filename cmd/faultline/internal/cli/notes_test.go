package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/faultline/faultline/symbolize/binfile"
)

// TestNotes: a C++ program's two system libraries without debug info make
// one short line (the example), the user's own binary another with
// the -g advice; repeated warnings are said once; past maxWarnings the rest
// are counted, and so are the ones a library did not keep; -v shows all.
func TestNotes(t *testing.T) {
	var n notes
	stdcxx := &binfile.NoDebugInfoError{Path: "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", File: "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", DynsymOnly: true, Searched: []string{"/root/.debug/x"}}
	gcc := &binfile.NoDebugInfoError{Path: "/lib/x86_64-linux-gnu/libgcc_s.so.1", File: "/lib/x86_64-linux-gnu/libgcc_s.so.1", DynsymOnly: true}
	app := &binfile.NoDebugInfoError{Path: "/home/u/app", File: "/home/u/app"}
	n.add(stdcxx, gcc, fmt.Errorf("wrapped: %w", stdcxx), app)
	for i := range 5 {
		n.add(fmt.Errorf("warning %d", i), fmt.Errorf("warning %d", i))
	}
	n.add(nil, errors.New("warning 0"))
	n.drop(7)
	var out bytes.Buffer
	n.write(&out, false)
	want := []string{
		"faultline: note: no debug info for 2 system libraries (libstdc++.so.6, libgcc_s.so.1): names from their symbol tables; faultline help debuginfo",
		"faultline: note: no debug info in app: no file:line or inline frames; build it with -g",
		"faultline: warning: warning 0",
		"faultline: warning: warning 1",
		"faultline: warning: warning 2",
		"faultline: warning: 2 more warnings (-v shows them), and 7 not kept",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	out.Reset()
	n.write(&out, true)
	if got := strings.Count(out.String(), "\n"); got != 3+5+1 {
		t.Errorf("-v: %d lines, want 9 (3 binaries, 5 warnings, the count):\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "searched 1 places (first /root/.debug/x)") || !strings.Contains(out.String(), "rebuild it with -g") {
		t.Errorf("-v lacks the details:\n%s", out.String())
	}
	var one notes
	one.add(gcc)
	out.Reset()
	one.write(&out, false)
	if got := out.String(); got != "faultline: note: no debug info for libgcc_s.so.1: names from their symbol tables; faultline help debuginfo\n" {
		t.Errorf("one library: %q", got)
	}
	if code, out, _ := runCLI("help", "debuginfo"); code != ExitOK || !strings.Contains(out, "build them with -g") {
		t.Errorf("help debuginfo: exit %d\n%s", code, out)
	}
}

// TestNotesDetails: a detail (a fact needing no action) is silent without
// -v and said once, as a note, with it.
func TestNotesDetails(t *testing.T) {
	var n notes
	d := &detailNote{errors.New("aligned_alloc is the same function as memalign")}
	n.add(d, d)
	var out bytes.Buffer
	n.write(&out, false)
	if out.Len() != 0 {
		t.Errorf("without -v: %q, want nothing", out.String())
	}
	n.write(&out, true)
	if got := out.String(); got != "faultline: note: aligned_alloc is the same function as memalign\n" {
		t.Errorf("-v: %q", got)
	}
}
