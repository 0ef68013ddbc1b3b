package attribute

import "testing"

// ms is a time in ms, the timeline's finest tick.
func ms(n int) uint64 { return uint64(n) * 1e6 }

// TestResidentReleaseAndPeak: pages counted by hand. Owner 0 touches 3
// pages, owner 1 two (total 5: the peak), a munmap of owner 0's first two
// pages leaves 3; a touch of a released page is a re-fault; the peak keeps
// what each held at 5.
func TestResidentReleaseAndPeak(t *testing.T) {
	r := NewResident(true)
	for i, o := range []int{0, 0, 0, 1, 1} {
		if st := r.Touch(1, uint64(i)*PageSize+5, ms(10+i), o); st != PageNew {
			t.Fatalf("page %d: %v, want new", i, st)
		}
	}
	if st := r.Touch(1, 2*PageSize, ms(20), 1); st != PageResident {
		t.Errorf("second touch: %v, want resident", st)
	}
	r.Release(1, 0, 2*PageSize, ms(30))
	if st := r.Touch(1, PageSize, ms(40), 1); st != PageReleased {
		t.Errorf("touch after release: %v, want released", st)
	}
	if p, at := r.PeakPages(); p != 5 || at != ms(14) {
		t.Errorf("peak %d pages at %d, want 5 at %d", p, at, ms(14))
	}
	if r.Peak(0) != 3 || r.Peak(1) != 2 {
		t.Errorf("at the peak: owner 0 %d, owner 1 %d, want 3 and 2", r.Peak(0), r.Peak(1))
	}
	if r.Refaults() != 1 {
		t.Errorf("refaults %d, want 1", r.Refaults())
	}
	r.Exit(1, ms(50))
	if r.End(0) != 1 || r.End(1) != 3 {
		t.Errorf("at the end: owner 0 %d, owner 1 %d, want 1 and 3", r.End(0), r.End(1))
	}
	// A huge release walks the pages touched, not the range.
	r.Touch(2, 1<<40, ms(60), 0)
	r.Release(2, 0, 1<<62, ms(70))
	if r.End(0) != 1 {
		t.Errorf("after the huge release owner 0 holds %d at the end, want 1", r.End(0))
	}
	pts, _, _, _ := r.Timeline()
	at := ResidentAt(pts, 2, []uint64{ms(14), ms(35), ms(45)})
	if at[0][0] != 3 || at[0][1] != 2 || at[1][0] != 1 || at[1][1] != 2 || at[2][1] != 3 {
		t.Errorf("timeline %v, want [[3 2] [1 2] [1 3]]", at)
	}
}

// TestResidentMove: mremap moves pages with their owner; a shrink
// releases the tail.
func TestResidentMove(t *testing.T) {
	r := NewResident(false)
	for i := range 4 {
		r.Touch(1, uint64(i)*PageSize, 1, 0)
	}
	r.Move(1, 0, 4*PageSize, 100*PageSize, 2*PageSize, 2)
	if r.End(0) != 2 {
		t.Errorf("after the shrinking move %d pages, want 2", r.End(0))
	}
	if st := r.Touch(1, 101*PageSize, 3, 0); st != PageResident {
		t.Errorf("moved page: %v, want resident", st)
	}
	if st := r.Touch(1, 0, 3, 0); st != PageNew {
		t.Errorf("old place: %v, want new", st)
	}
}
