package recorder

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestStartHeldFallsBack: a launcher that cannot be run (here a missing
// file) leaves the job to faultline's own executable, which in a test is
// this test binary, whose package launch init is the Go launcher.
func TestStartHeldFallsBack(t *testing.T) {
	var out bytes.Buffer
	h, err := waitHeld(startHeld(filepath.Join(t.TempDir(), "missing"), "/bin/sh", []string{"sh", "-c", "echo ran"}, false, false, nil, nil, &out, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.release(); err != nil {
		t.Fatal(err)
	}
	<-h.done
	if !h.statusKnown || h.status != 0 || out.String() != "ran\n" {
		t.Errorf("the command through the fallback launcher: status %v (known %v), output %q", h.status, h.statusKnown, out.String())
	}
}

// TestStartHeldPreloadAtExec: an LD_PRELOAD in record's own environment
// reaches the command, and not the guard (the command's parent), which is
// faultline: a user's preloaded allocator costs its start-up once, in the
// program, not again in each of record's own processes.
func TestStartHeldPreloadAtExec(t *testing.T) {
	lib := "/lib/x86_64-linux-gnu/libm.so.6"
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("no %s to preload: %v", lib, err)
	}
	t.Setenv("LD_PRELOAD", lib)
	var out bytes.Buffer
	script := `echo "$LD_PRELOAD"; tr '\0' '\n' < /proc/$PPID/environ | grep -c '^LD_PRELOAD=' || true`
	h, err := waitHeld(startHeld("", "/bin/sh", []string{"sh", "-c", script}, false, false, nil, nil, &out, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.release(); err != nil {
		t.Fatal(err)
	}
	<-h.done
	if want := lib + "\n0\n"; out.String() != want {
		t.Errorf("the command's LD_PRELOAD and the guard's count of LD_PRELOAD entries: %q, want %q", out.String(), want)
	}
}

// TestStartHeldRest: the guard says whether processes of the command's
// tree were left when the command ended: none after sh -c true; one after
// a shell that leaves a sleep running in the background (which the guard
// kills at end).
func TestStartHeldRest(t *testing.T) {
	for _, c := range []struct {
		script string
		rest   bool
	}{
		{"true", false},
		{"sleep 5 & exit 0", true},
	} {
		h, err := waitHeld(startHeld("", "/bin/sh", []string{"sh", "-c", c.script}, false, false, nil, nil, io.Discard, io.Discard))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.release(); err != nil {
			t.Fatal(err)
		}
		<-h.exited
		if !h.statusKnown || h.rest != c.rest {
			t.Errorf("sh -c %q: rest %v (status known %v), want %v", c.script, h.rest, h.statusKnown, c.rest)
		}
		h.end()
	}
}

// waitHeld waits for a command startHeld started to be held.
func waitHeld(s *startingCommand, err error) (*heldCommand, error) {
	if err != nil {
		return nil, err
	}
	return s.wait()
}
