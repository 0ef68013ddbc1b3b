package perfdata

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestTrimKeepsRecords reads every committed perf recording as a stream
// twice, the second time trimming after every record: both deliver the
// same records (type, time, offset) in the same order.
func TestTrimKeepsRecords(t *testing.T) {
	files, err := filepath.Glob("../testdata/*/*.data")
	if err != nil || len(files) < 20 {
		t.Fatalf("found %d committed recordings under testdata (%v)", len(files), err)
	}
	read := func(path string, trim bool) []string {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := NewStream(f, nil)
		if err != nil {
			return []string{"open: " + err.Error()}
		}
		defer r.Close()
		var out []string
		for r.Next() {
			c := r.Record().Common()
			out = append(out, fmt.Sprintf("%T %d %d", r.Record(), c.Time, c.Offset))
			if trim {
				r.trim(0) // Trim, its queue reallocated whenever it can be
			}
		}
		if r.Err() != nil {
			out = append(out, "error: "+r.Err().Error())
		}
		return out
	}
	for _, path := range files {
		a, b := read(path, false), read(path, true)
		if len(a) != len(b) {
			t.Errorf("%s: %d records, %d trimming", path, len(a), len(b))
			continue
		}
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%s: record %d: %s, trimming %s", path, i, a[i], b[i])
				break
			}
		}
	}
}
