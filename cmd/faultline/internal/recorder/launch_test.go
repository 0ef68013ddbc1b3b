package recorder

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"
)

// TestStartHeldFallsBack: a launcher that cannot be run (here a missing
// file) leaves the job to faultline's own executable, which in a test is
// this test binary, whose package launch init is the Go launcher.
func TestStartHeldFallsBack(t *testing.T) {
	var out bytes.Buffer
	h, err := startHeld(filepath.Join(t.TempDir(), "missing"), "/bin/sh", []string{"sh", "-c", "echo ran"}, false, false, nil, nil, &out, io.Discard)
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
