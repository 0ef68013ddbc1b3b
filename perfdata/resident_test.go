package perfdata

import (
	"bytes"
	"hash/fnv"
	"os"
	"path/filepath"
	"testing"
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
	path := filepath.Join(t.TempDir(), "big.data")
	if err := os.WriteFile(path, p, 0o644); err != nil {
		t.Fatal(err)
	}
	mem, err := New(bytes.NewReader(p), int64(len(p)), nil)
	if err != nil {
		t.Fatal(err)
	}
	want, wantN := digest(t, mem)
	mem.Close()

	r, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.src.res.mapping == nil {
		t.Skip("file not memory mapped on this system")
	}
	got, gotN := digest(t, r)
	if got != want || gotN != wantN {
		t.Errorf("mapped decode with drops: %d samples, digest %x; in memory: %d samples, digest %x", gotN, got, wantN, want)
	}
	if r.src.res.drops == 0 {
		t.Errorf("no pages dropped while decoding %d MB", len(p)>>20)
	}
}
