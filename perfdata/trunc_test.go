package perfdata

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// truncInputs returns recordings to cut: committed fixtures (plain, -z and
// pipe) and synthetic ones.
func truncInputs(t *testing.T) map[string][]byte {
	in := map[string][]byte{}
	for _, pat := range []string{"../testdata/perf/basic.plain.data", "../testdata/perf/threads.z.data", "../testdata/perf/threads.pipe.data"} {
		m, _ := filepath.Glob(pat)
		if len(m) == 0 {
			t.Fatalf("committed fixture missing: %s (testdata/gen.sh makes it)", pat)
		}
		for _, f := range m {
			p, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			in[filepath.Base(f)] = p
		}
	}
	in["synthetic"] = dwarfSynth(300)
	s := newSynthDWARF(300)
	s.compress([]int{s.data.Len() / 3, s.data.Len() / 2}, false)
	in["synthetic-zstd"] = s.file()
	return in
}

func decodeStrings(p []byte, opts *Options, stream bool) (recs []string, warnings []error, err error) {
	var r *Reader
	if stream {
		r, err = NewStream(bytes.NewReader(p), opts)
	} else {
		r, err = New(bytes.NewReader(p), int64(len(p)), opts)
	}
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	for r.Next() {
		// A cut before the feature sections loses the event names: compare
		// the records without them.
		f := fmtRecord(r.Record())
		if i := strings.Index(f, "{"); i >= 0 {
			f = f[i:]
		}
		recs = append(recs, f)
	}
	return recs, r.Warnings(), r.Err()
}

// TestTruncated cuts recordings at many offsets: decoding must not panic or
// fail, must deliver exactly the whole records before the cut (a prefix of
// the full decode in file order) and must warn where and why it stopped.
func TestTruncated(t *testing.T) {
	for name, p := range truncInputs(t) {
		t.Run(name, func(t *testing.T) {
			opts := &Options{Order: FileOrder}
			full, _, err := decodeStrings(p, opts, false)
			if err != nil {
				t.Fatal(err)
			}
			pipe := bytes.Equal(p[8:16], []byte{16, 0, 0, 0, 0, 0, 0, 0})
			step := max(len(p)/150, 1)
			if testing.Short() {
				step *= 5
			}
			cuts := 0
			for cut := 0; cut < len(p); cut += step + cut%7 {
				q := p[:cut]
				got, warns, err := decodeStrings(q, opts, false)
				if pipe {
					got2, _, err2 := decodeStrings(q, opts, true)
					if fmt.Sprint(got2) != fmt.Sprint(got) || (err == nil) != (err2 == nil) {
						t.Fatalf("cut %d: stream and ReaderAt differ: %d vs %d records, %v vs %v", cut, len(got2), len(got), err2, err)
					}
				}
				if err != nil {
					// Only a cut inside the header and attrs may fail.
					if len(got) > 0 {
						t.Fatalf("cut at %d: error after %d records: %v", cut, len(got), err)
					}
					continue
				}
				cuts++
				if len(got) > len(full) {
					t.Fatalf("cut at %d: %d records, more than the %d of the full file", cut, len(got), len(full))
				}
				for i := range got {
					if got[i] != full[i] {
						t.Fatalf("cut at %d: record %d differs:\n got %.300s\nwant %.300s", cut, i, got[i], full[i])
					}
				}
				if len(got) < len(full) {
					ws := fmt.Sprint(warns)
					if !strings.Contains(ws, "was perf record stopped before it finished writing?") && !strings.Contains(ws, "truncated") {
						t.Fatalf("cut at %d: %d of %d records and no truncation warning: %v", cut, len(got), len(full), ws)
					}
				}
				// Time order must deliver the same records.
				tgot, _, err := decodeStrings(q, nil, false)
				if err != nil || len(tgot) != len(got) {
					t.Fatalf("cut at %d: time order gives %d records (%v), file order %d", cut, len(tgot), err, len(got))
				}
			}
			t.Logf("%d cuts decoded", cuts)
		})
	}
}
