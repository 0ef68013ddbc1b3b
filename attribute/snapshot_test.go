package attribute

import "testing"

// The owners in these tests: 0 and 1 are two allocations, 2 the heap
// around them.
func testOwnerAt(pid uint32, addr uint64) int {
	switch {
	case addr >= 0x200000 && addr < 0x300000:
		return 0
	case addr >= 0x300000 && addr < 0x400000:
		return 1
	}
	return 2
}

// A huge-page fault makes all 512 pages resident, each for the
// allocation that holds it; the pages count as huge at the peak.
func TestTouchRangeHuge(t *testing.T) {
	r := NewResident(false)
	r.TouchRange(1, 0x200010, 0x200000, 0x400000, 10, 0, true, testOwnerAt)
	if p0, p1 := r.Peak(0), r.Peak(1); p0 != 256 || p1 != 256 {
		t.Errorf("peak pages %d, %d; want 256 each (1 MiB of the huge page each)", p0, p1)
	}
	if h := r.HugePeak(0) + r.HugePeak(1); h != 512 {
		t.Errorf("huge pages at the peak %d, want 512", h)
	}
	if st := r.Touch(1, 0x3ff000, 11, 1); st != PageResident {
		t.Errorf("a later fault in the huge page found %v, want resident", st)
	}
}

// A snapshot releases the pages it does not hold (unless faulted while
// it was read) and adds those no fault showed.
func TestSnapshotReconciles(t *testing.T) {
	r := NewResident(false)
	r.Snapshots = true
	for a := uint64(0x200000); a < 0x280000; a += PageSize { // 128 pages of owner 0
		r.Touch(1, a, 10, 0)
	}
	r.Touch(1, 0x300000, 25, 1) // faulted while the snapshot was read (20..30)
	// The page tables: owner 0's first 64 pages (the rest swapped out),
	// and all of owner 1's 256 pages as a huge page (collapsed).
	rs := []SnapRange{{0x200000, 0x240000, false}, {0x300000, 0x400000, true}}
	before, after := r.Snapshot(1, 20, 30, 0, 1<<47, rs, testOwnerAt)
	if before != 129 || after != 64+256 {
		t.Errorf("before %d after %d; want 129, 320", before, after)
	}
	if e0, e1 := r.End(0), r.End(1); e0 != 64 || e1 != 256 {
		t.Errorf("resident now %d, %d; want 64, 256", e0, e1)
	}
	st := r.SnapshotStats()
	if st.Added != 255 || st.Removed != 64 {
		t.Errorf("added %d removed %d; want 255, 64", st.Added, st.Removed)
	}
	if got := r.ResidentBytes(1, 0x200010, 0x280000); got != 0x40000-0x10 {
		t.Errorf("resident bytes of the first allocation %d, want %d", got, 0x40000-0x10)
	}
}

// A forked child holds its parent's pages as shared until it writes
// them: a snapshot of the child counts only those it wrote.
func TestForkSharedPages(t *testing.T) {
	r := NewResident(false)
	for a := uint64(0x200000); a < 0x300000; a += PageSize {
		r.Touch(1, a, 10, 0)
	}
	r.Fork(1, 2)
	for a := uint64(0x200000); a < 0x280000; a += PageSize { // the child writes half
		if st := r.Touch(2, a, 20, 0); st != PageNew {
			t.Fatalf("child's copy-on-write fault found %v, want new", st)
		}
	}
	_, after := r.Snapshot(2, 30, 31, 0, 1<<47, []SnapRange{{0x200000, 0x300000, false}}, testOwnerAt)
	if after != 128 {
		t.Errorf("the child's page tables hold %d pages of its own, want 128 (the other 128 are its parent's, shared)", after)
	}
	sp := r.SpacePeaks()
	for _, s := range sp {
		if s.Pid == 2 && s.End != 128 {
			t.Errorf("the child holds %d pages of its own, want 128 (the half it wrote)", s.End)
		}
		if s.Pid == 1 && s.End != 256 {
			t.Errorf("the parent holds %d pages, want 256", s.End)
		}
	}
}

// A collapse makes the aligned 2 MiB region inside the advised range
// resident and huge, each page for its owner; the unaligned rest of the
// range keeps what the faults made resident.
func TestCollapse(t *testing.T) {
	r := NewResident(false)
	for a := uint64(0x1ff000); a < 0x400000; a += 2 * PageSize { // every other page, from the page before the region
		r.Touch(1, a, 10, testOwnerAt(1, a))
	}
	r.Collapse(1, 0x1ff000, 0x401000, 20, testOwnerAt)
	// 0x200000-0x400000 is the only aligned region: 256 pages of owner 0,
	// 256 of owner 1; the page at 0x1ff000 (owner 2) stays as it was.
	if p0, p1, p2 := r.End(0), r.End(1), r.End(2); p0 != 256 || p1 != 256 || p2 != 1 {
		t.Errorf("resident pages %d, %d, %d; want 256, 256 and 1 (the page at 0x1ff000, touched)", p0, p1, p2)
	}
	if h := r.HugePeak(0) + r.HugePeak(1); h != 512 {
		t.Errorf("huge pages at the peak %d, want 512", h)
	}
	r.Collapse(1, 0x200000, 0x3ff000, 30, testOwnerAt) // no whole region: nothing
	if got := r.End(0) + r.End(1) + r.End(2); got != 513 {
		t.Errorf("resident pages after a collapse of no whole region %d, want 513", got)
	}
}
