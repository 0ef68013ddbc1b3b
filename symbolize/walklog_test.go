package symbolize

import (
	"fmt"
	"testing"

	"github.com/faultline/faultline/perfdata"
)

// TestPrewalkerLog: Walkers that catch up with the Prewalker's log of
// mapping changes at different paces see, at each version, exactly the
// mappings the Prewalker saw then; the log is trimmed behind the slowest
// Walker, asks for a Settle when one lags too far, and Settle brings every
// Walker to the latest mappings.
func TestPrewalkerLog(t *testing.T) {
	s := &Session{}
	pre, ws := s.newPrewalker(2)
	pre.trimAt, pre.settleAt = 8, 40
	fast, slow := ws[0], ws[1]
	const pid = 7
	// Change i maps file "f<i>" at page i%5, over what was there; every
	// 7th change is an exec (the process's mappings go), every 11th a
	// fork to pid+1. want[v] is what page p shows after v changes.
	type view [5]string
	var want []view
	look := func(m *Maps) (v view) {
		for pg := range v {
			if x := m.find(pid, uint64(pg)*4096+8); x != nil {
				v[pg] = x.File
			}
		}
		return v
	}
	want = append(want, look(pre.own))
	settles := 0
	for i := 1; i <= 120; i++ {
		var rec perfdata.Record
		switch {
		case i%7 == 0:
			rec = &perfdata.Comm{Pid: pid, Tid: pid, Exec: true, Comm: "x"}
		case i%11 == 0:
			rec = &perfdata.Fork{Pid: pid + 1, Tid: pid + 1, Ppid: pid, Ptid: pid}
		default:
			pg := uint64(i % 5)
			rec = &perfdata.Mmap{Pid: pid, Tid: pid,
				Addr: pg * 4096, Len: 4096, Filename: fmt.Sprintf("/f%d", i), Prot: 5}
		}
		if !pre.Changes(rec) {
			t.Fatalf("change %d (%T) not seen as a change", i, rec)
		}
		if pre.Observe(rec) {
			// As the pipeline does once no walk runs.
			settles++
			pre.Settle()
			for _, w := range ws {
				if got := look(w.maps); got != look(pre.own) {
					t.Fatalf("after Settle at change %d: walker sees %v, want %v", i, got, look(pre.own))
				}
			}
		}
		want = append(want, look(pre.own))
		v := pre.base + len(pre.log)
		fast.catchUp(v)
		if got := look(fast.maps); got != want[v] {
			t.Fatalf("fast walker at version %d: %v, want %v", v, got, want[v])
		}
		// The slow one keeps 3 changes behind, then moves one change
		// every third.
		if i <= 30 && v > 3 {
			slow.catchUp(v - 3)
		} else if i > 30 && i%3 == 0 && slow.applied < v {
			slow.catchUp(slow.applied + 1)
		}
		if got := look(slow.maps); got != want[slow.applied] {
			t.Fatalf("slow walker at version %d: %v, want %v", slow.applied, got, want[slow.applied])
		}
		if i == 30 && pre.base == 0 {
			t.Error("the log was never trimmed behind a walker 3 changes behind")
		}
		if len(pre.log) > pre.settleAt {
			t.Fatalf("log has %d entries, more than settleAt %d", len(pre.log), pre.settleAt)
		}
	}
	if want[len(want)-1] == (view{}) {
		t.Error("the changes left no mapping to compare")
	}
	if settles == 0 {
		t.Error("the slow walker never made the log ask for a Settle")
	}
}
