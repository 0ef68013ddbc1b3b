package cli

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordInprocLiveUnshimmed records testdata/record/src/unshimmed.c,
// whose children run the program again after clearenv(), with LD_PRELOAD
// set empty, and after dropping to uid 65534: the program's standard
// output and standard error are byte-identical with and without record
// (-q: record itself says nothing; no loader error from the child that
// can no longer read record's files), and record and analyze name the
// three children whose calls the recording lacks (comm "exe": they run
// /proc/self/exe), while the parent's 1000 malloc(3000) are all there and
// the children's are not.
func TestRecordInprocLiveUnshimmed(t *testing.T) {
	progs := requireInproc(t)
	prog := filepath.Join(progs, "unshimmed")
	run := func(args ...string) (string, string) {
		var out, errb bytes.Buffer
		c := exec.Command(args[0], args[1:]...)
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errb.String())
		}
		return out.String(), errb.String()
	}
	nativeOut, nativeErr := run(prog)
	if !strings.Contains(nativeOut, "setuid: 1000 malloc(3000)") {
		t.Fatalf("the program's own run did not reach its setuid child:\n%s%s", nativeOut, nativeErr)
	}
	bin := buildFaultline(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "u.data")
	recOut, recErr := run(bin, "record", "-q", "-o", data, "--", prog)
	if recOut != nativeOut || recErr != nativeErr {
		t.Errorf("the program's output changed under record:\nstdout %q\nwant   %q\nstderr %q\nwant   %q", recOut, nativeOut, recErr, nativeErr)
	}
	_, sizes, _ := callCounts(t, data)
	var n uint64
	for _, c := range sizes[3000] {
		n += c
	}
	if n != 1000 {
		t.Errorf("%d malloc(3000) recorded, want the parent's 1000 (the children's are out of reach)", n)
	}

	_, loud := run(bin, "record", "-o", data, "--", prog)
	for _, want := range []string{"2 programs (exe ", "ran without the shim", "1 program (exe ", "could not reach record's rings"} {
		if !strings.Contains(loud, want) {
			t.Errorf("record's summary lacks %q:\n%s", want, loud)
		}
	}
	_, an := run(bin, "analyze", "-o", filepath.Join(dir, "u.pb.gz"), data)
	for _, want := range []string{"2 ran without the in-process shim (exe ", "1 loaded it but could not reach the recorder's rings (exe "} {
		if !strings.Contains(an, want) {
			t.Errorf("analyze's summary lacks %q:\n%s", want, an)
		}
	}
}
