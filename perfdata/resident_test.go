package perfdata

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// digest decodes r in time order and hashes what the samples carry.
func digest(t *testing.T, r *Reader) (uint64, int) {
	t.Helper()
	h := fnv.New64a()
	n := 0
	var w [8]byte
	for r.Next() {
		s, ok := r.Record().(*Sample)
		if !ok {
			continue
		}
		n++
		for _, v := range append([]uint64{s.Time, uint64(s.Pid), s.Addr}, s.Regs...) {
			r.bo.PutUint64(w[:], v)
			h.Write(w[:])
		}
		h.Write(s.Stack)
		h.Write(s.Raw)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return h.Sum64(), n
}

// TestResidencyDropsKeepRecords: a mapped recording much larger than the
// resident budget is decoded with its pages dropped behind the cursor, and
// every record still reads the same as from a copy in memory (dropped
// pages of a file mapping are read back from the page cache).
func TestResidencyDropsKeepRecords(t *testing.T) {
	p := dwarfSynth(5000) // ~30 MB, FINISHED_ROUND every 64 samples
	if len(p) < 2*maxGranules*granule {
		t.Fatalf("synthetic recording of %d bytes is too small to exercise drops", len(p))
	}
	mem, err := New(bytes.NewReader(p), int64(len(p)), nil)
	if err != nil {
		t.Fatal(err)
	}
	want, wantN := digest(t, mem)
	mem.Close()

	r := openMapped(t, p)
	defer r.Close()
	got, gotN := digest(t, r)
	if got != want || gotN != wantN {
		t.Errorf("mapped decode with drops: %d samples, digest %x; in memory: %d samples, digest %x", gotN, got, wantN, want)
	}
	if r.src.res.drops == 0 {
		t.Errorf("no pages dropped while decoding %d MB", len(p)>>20)
	}
}

// openMapped writes recording p to a file and opens it, memory mapped.
func openMapped(t *testing.T, p []byte) *Reader {
	t.Helper()
	path := filepath.Join(t.TempDir(), "big.data")
	if err := os.WriteFile(path, p, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.src.res.mapping == nil {
		r.Close()
		t.Fatal("a regular file was not memory mapped")
	}
	return r
}

// mappingRSS returns the resident bytes of the mapping starting at b
// (the Rss of its VMA in /proc/self/smaps).
func mappingRSS(t *testing.T, b []byte) int64 {
	t.Helper()
	f, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&b[0])))
	in := false
	for _, line := range strings.Split(string(f), "\n") {
		if strings.HasPrefix(line, start) {
			in = true
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "Rss:")), "%d kB", &kb); err != nil {
				t.Fatalf("smaps line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VMA at %s in /proc/self/smaps", start)
	return 0
}

// TestResidencyBound: with releases deferred as a pipeline defers them (one
// waits until the next is asked for), what the recording holds resident
// stays within the granules the reader may hold before a release and the
// one pending release — checked throughout a decode of a recording several
// times that size, and at its end.
func TestResidencyBound(t *testing.T) {
	p := dwarfSynth(8000)
	r := openMapped(t, p)
	defer r.Close()
	const hold = 1
	var pending func()
	r.DeferDrops(hold, func(drop func()) {
		if pending != nil {
			pending()
		}
		pending = drop
	})
	// Held before a release (hold+1 granules: a record may straddle)
	// and as much waiting in the pending release.
	bound := int64(2*(hold+1)+1) * granule
	if 3*bound > int64(len(p)) {
		t.Fatalf("synthetic recording of %d bytes is too small for a bound of %d", len(p), bound)
	}
	var peak int64
	n := 0
	for r.Next() {
		if n++; n%200 == 0 {
			peak = max(peak, mappingRSS(t, r.src.res.mapping))
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.src.res.drops < 3 {
		t.Fatalf("only %d releases while decoding %d MB", r.src.res.drops, len(p)>>20)
	}
	end := mappingRSS(t, r.src.res.mapping)
	t.Logf("recording %d MB: peak resident %d KB, at the end %d KB, bound %d KB", len(p)>>20, peak>>10, end>>10, bound>>10)
	if peak > bound || end > bound {
		t.Errorf("resident part of the mapping: peak %d KB, at the end %d KB; want at most %d KB", peak>>10, end>>10, bound>>10)
	}
}
