package recorder

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/pagemap"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
)

// TestProcessTree finds a child and a grandchild of this process (sh
// starting sleep), and not this process's parent.
func TestProcessTree(t *testing.T) {
	c := exec.Command("sh", "-c", "sleep 5 & wait")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	var tree procTree
	var pids []int
	for i := 0; i < 100; i++ {
		if pids = tree.list(pids[:0], os.Getpid()); len(pids) >= 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(pids) != 3 || pids[0] != os.Getpid() || !slices.Contains(pids, c.Process.Pid) || slices.Contains(pids, os.Getppid()) {
		t.Errorf("tree of %d: %v (child %d)", os.Getpid(), pids, c.Process.Pid)
	}
}

// TestSnapRecords splits a snapshot of more ranges than one record holds
// into records whose [lo, hi) tile the address space, and the reader
// finds every range back through the format's fields.
func TestSnapRecords(t *testing.T) {
	sp := snapSpec(perfdata.AttrSampleIDAll, 1)
	var rs []pagemap.Range
	n := schema.SnapshotMaxRanges + 10
	for i := 0; i < n; i++ {
		a := uint64(i) * 2 * pagemap.PageSize
		rs = append(rs, pagemap.Range{Start: a, End: a + pagemap.PageSize, Flags: pagemap.Present})
	}
	recs := snapRecords(nil, sp, 7, schema.SnapshotExit, 10, 20, 1, 2, rs)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	f, err := perfdata.ParseTraceFormat(schema.System, sp.format)
	if err != nil {
		t.Fatal(err)
	}
	ranges, lo, hi := f.Field(schema.SnapshotRanges), f.Field("lo"), f.Field("hi")
	const rawAt = 8 * 5 // IDENTIFIER, IP, TID, TIME, CPU
	var prevHi uint64
	got := 0
	for i, b := range recs {
		if len(b) > 0xffff-8 {
			t.Fatalf("record %d: %d bytes, more than a record holds", i, len(b))
		}
		raw := b[rawAt+4:]
		l, _ := lo.Uint64(raw)
		h, _ := hi.Uint64(raw)
		if l != prevHi {
			t.Errorf("record %d starts at %#x, the last ended at %#x", i, l, prevHi)
		}
		prevHi = h
		d, ok := ranges.Bytes(raw)
		if !ok {
			t.Fatalf("record %d: ranges unreadable", i)
		}
		got += len(d) / 24
	}
	if got != n || prevHi != 1<<64-1 {
		t.Errorf("%d ranges read back ending at %#x, want %d to the top", got, prevHi, n)
	}
}
