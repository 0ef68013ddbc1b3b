package attribute

import "sort"

// What the page tables say: a recording can carry snapshots of each
// process's resident anonymous pages, read from its page tables while it
// runs and as it exits. The faults build the resident memory page by page
// between them; a snapshot sets it to what the kernel held, which catches
// what no fault shows: a huge page collapsed from small ones, pages
// swapped out or reclaimed, pages shared with a parent after fork.

// SnapRange is a run of resident pages [Start, End) in a snapshot; Huge
// says a huge page maps them.
type SnapRange struct {
	Start, End uint64
	Huge       bool
}

// SnapshotStats sums what the snapshots changed in the fault-built
// figures.
type SnapshotStats struct {
	// Records counts the snapshot records applied or, Late, left out:
	// read before their process ended but delivered after its end.
	Records, Late uint64
	// Added and Removed count the pages a snapshot found resident that no
	// fault had made so, and the pages the faults had made resident that
	// the snapshot found gone.
	Added, Removed int64
}

// OwnerAt names the owner of the page at addr in pid (an allocation's
// site, a mapping's, a class of memory), or returns -1 for a page not
// followed.
type OwnerAt func(pid uint32, addr uint64) int

// Snapshot sets pid's resident pages in [lo, hi) to the resident ranges
// of a snapshot (sorted, disjoint) read from the page tables between
// times t0 and t: pages the tracker followed that are not in them are
// released (unless touched since t0: the read may have passed them before
// the fault), pages in them it did not follow become resident for
// ownerAt's owner (a forked child's pages shared with its parent stay its
// parent's). It returns the process's resident pages in [lo, hi) before
// and after (its own: pages shared with its parent are not counted).
func (r *Resident) Snapshot(pid uint32, t0, t, lo, hi uint64, rs []SnapRange, ownerAt OwnerAt) (before, after int64) {
	r.snap.Records++
	if end, ok := r.endedAt[pid]; ok && r.procs[pid] == nil && end >= t0 {
		// Read before the process ended, delivered after: its pages are
		// gone from the figures already.
		r.snap.Late++
		return 0, 0
	}
	p := r.proc(pid)
	recent := p.since(t0)
	covered := func(pg uint64) bool {
		a := pg * PageSize
		i := sort.Search(len(rs), func(i int) bool { return rs[i].End > a })
		return i < len(rs) && rs[i].Start <= a
	}
	loPg, hiPg := lo/PageSize, hi/PageSize
	for pg, v := range p.pages {
		if pg < loPg || pg >= hiPg || v&(releasedBit|inheritedBit) != 0 {
			continue
		}
		before++
		if !covered(pg) && !recent[pg] {
			p.pages[pg] = v&^hugeBit | releasedBit
			r.drop(p, v, t)
			r.snap.Removed++
		}
	}
	for _, rg := range rs {
		for a := max(rg.Start, lo); a < min(rg.End, hi); a += PageSize {
			if r.settle(p, pid, a, rg.Huge, t, ownerAt) {
				r.snap.Added++
			}
			if v := p.pages[a/PageSize]; v&inheritedBit == 0 {
				after++ // not counting a parent's pages shared with it
			}
		}
	}
	// Pages the snapshot left out but a recent fault made resident.
	for pg := range recent {
		if v := p.pages[pg]; pg >= loPg && pg < hiPg && v&(releasedBit|inheritedBit) == 0 && !covered(pg) {
			after++
		}
	}
	return before, after
}

// settle makes the page at a resident (huge: mapped by a huge page) at
// time t, for ownerAt's owner if no fault made it so; it reports whether
// it added the page.
func (r *Resident) settle(p *resProc, pid uint32, a uint64, huge bool, t uint64, ownerAt OwnerAt) bool {
	pg := a / PageSize
	v := p.pages[pg]
	switch {
	case v != 0 && v&(releasedBit|inheritedBit) == 0:
		if huge != (v&hugeBit != 0) {
			o := int(v&ownerMask) - 1
			if huge {
				p.pages[pg] = v | hugeBit
				r.huge[o]++
			} else {
				p.pages[pg] = v &^ hugeBit
				r.huge[o]--
			}
		}
		return false
	case v&(inheritedBit|releasedBit) == inheritedBit:
		return false // the parent's, shared
	}
	o := ownerAt(pid, a)
	if o < 0 {
		return false
	}
	r.add(p, pg, o, huge, t)
	return true
}

// TouchRange makes every page of [start, end) resident at time t, as one
// fault that mapped a huge page does (huge), each for its owner (ownerAt),
// the faulting page at addr for owner. It returns the state the faulting
// page was in.
func (r *Resident) TouchRange(pid uint32, addr, start, end, t uint64, owner int, huge bool, ownerAt OwnerAt) PageState {
	st := r.Touch(pid, addr, t, owner)
	p := r.procs[pid]
	if huge {
		r.settle(p, pid, addr&^(PageSize-1), true, t, func(uint32, uint64) int { return owner })
	}
	for a := start; a < end; a += PageSize {
		if a/PageSize != addr/PageSize {
			r.settle(p, pid, a, huge, t, ownerAt)
		}
	}
	return st
}

// HugePageSize is the size of a transparent huge page (x86-64's PMD).
const HugePageSize = 2 << 20

// Collapse applies a successful madvise(MADV_COLLAPSE) of [start, end) at
// time t: every huge-page-aligned 2 MiB region inside it is now mapped by
// one huge page, so all its pages are resident (those no fault made so
// for ownerAt's owner) and huge. No fault shows this; without it only the
// next snapshot would.
func (r *Resident) Collapse(pid uint32, start, end, t uint64, ownerAt OwnerAt) {
	p := r.proc(pid)
	for h := (start + HugePageSize - 1) &^ (HugePageSize - 1); h+HugePageSize <= end; h += HugePageSize {
		for a := h; a < h+HugePageSize; a += PageSize {
			r.settle(p, pid, a, true, t, ownerAt)
		}
	}
}

// Fork gives child the pages parent holds, as its parent's: they count in
// the child only once it writes them (a copy-on-write fault) or its parent
// is gone.
func (r *Resident) Fork(parent, child uint32) {
	pp := r.procs[parent]
	if pp == nil || parent == child {
		return
	}
	cp := r.proc(child)
	for pg, v := range pp.pages {
		if v&(releasedBit|inheritedBit) == 0 {
			if _, ok := cp.pages[pg]; !ok {
				cp.pages[pg] = v&ownerMask | inheritedBit
			}
		}
	}
}

// maxRecent bounds a process's recent touches between snapshots: beyond
// it the older half is forgotten (a snapshot may then release a page
// faulted while it was read, until the next one).
const maxRecent = 1 << 20

// remember notes page pg touched at time t.
func (p *resProc) remember(pg, t uint64) {
	if len(p.recent) >= maxRecent {
		p.recent = append(p.recent[:0], p.recent[maxRecent/2:]...)
	}
	p.recent = append(p.recent, touch{pg, t})
}

// since returns the pages touched from t0 on, and forgets the older ones.
func (p *resProc) since(t0 uint64) map[uint64]bool {
	i := sort.Search(len(p.recent), func(i int) bool { return p.recent[i].time >= t0 })
	p.recent = append(p.recent[:0], p.recent[i:]...)
	if len(p.recent) == 0 {
		return nil
	}
	m := make(map[uint64]bool, len(p.recent))
	for _, x := range p.recent {
		m[x.page] = true
	}
	return m
}

// SnapshotStats returns what the snapshots changed.
func (r *Resident) SnapshotStats() SnapshotStats { return r.snap }

// SpacePeak is one address space's own resident pages: at its largest
// and when it ended (exit, or Exec: an exec replaced it).
type SpacePeak struct {
	Pid       uint32
	Peak, End int64
	Time      uint64
	Exec      bool
}

// SpacePeaks returns the figures of every address space, ended (in the
// order they ended) and live.
func (r *Resident) SpacePeaks() []SpacePeak {
	out := append([]SpacePeak(nil), r.spaces...)
	for _, pid := range sortedKeys(r.procs) {
		p := r.procs[pid]
		out = append(out, SpacePeak{Pid: pid, Peak: p.peak, End: p.cur})
	}
	return out
}

// ResidentBytes returns how many bytes of [start, end) lie in pages pid
// holds resident (its own, not shared with a parent).
func (r *Resident) ResidentBytes(pid uint32, start, end uint64) uint64 {
	p := r.procs[pid]
	if p == nil || end <= start {
		return 0
	}
	var n uint64
	for pg := start / PageSize; pg*PageSize < end; pg++ {
		if v := p.pages[pg]; v != 0 && v&(releasedBit|inheritedBit) == 0 {
			n += min(end, (pg+1)*PageSize) - max(start, pg*PageSize)
		}
	}
	return n
}
