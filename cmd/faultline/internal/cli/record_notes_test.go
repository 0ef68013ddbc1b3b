package cli

import (
	"bytes"
	"strings"
	"testing"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// TestRecordWarningsThroughNotes: overflowed rings and ring bytes that did
// not read as records are warnings gathered by the notes sink, written once
// at the end (after the summary) without -q; with -q the summary and the
// warnings are silent: nothing but errors.
func TestRecordWarningsThroughNotes(t *testing.T) {
	res := &rec.Result{Loss: rec.Loss{RangeLost: 7, StackLost: 3, Unreadable: 16}}
	for _, quiet := range []bool{false, true} {
		var stderr bytes.Buffer
		r := &recorder{env: &Env{Stderr: &stderr}, opts: &recordOptions{quiet: quiet, output: "x.data", recordRings: recordRings{mmapPages: 4096, stackPages: 1024}, recordStacks: recordStacks{stackEvery: 64}}}
		r.summarize(res, &outputFile{})
		if quiet && stderr.Len() != 0 {
			t.Errorf("-q: summary printed %q", stderr.String())
		}
		if len(r.notes.warnings) != 3 {
			t.Fatalf("quiet=%v: %d warnings gathered, want 3 (call and stack rings, unreadable bytes): %v", quiet, len(r.notes.warnings), r.notes.warnings)
		}
		if quiet {
			continue
		}
		r.notes.write(&stderr, false)
		out := stderr.String()
		i, j := strings.Index(out, "faultline: wrote x.data"), strings.Index(out, "faultline: warning: the call and fault rings overflowed: 7 records lost")
		if i < 0 || j < i || !strings.Contains(out, "faultline: warning: the stack rings overflowed: 3 stack samples lost") ||
			!strings.Contains(out, "faultline: warning: 16 bytes of the kernel's ring buffers did not read as records") {
			t.Errorf("without -q: want the summary, then the three warnings:\n%s", out)
		}
	}
}
