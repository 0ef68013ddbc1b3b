package attribute

// PageSize is the page the resident tracker counts in: the base page of
// x86-64 and of arm64's usual kernels. A huge page is counted as the base
// pages its faults touch.
const PageSize = 4096

// Resident follows, page by page, which owner made each anonymous page
// resident (its first-touch fault) and when it stopped being resident (a
// munmap, madvise(MADV_DONTNEED/FREE/REMOVE), brk shrinking, exec or exit).
// An owner is the caller's index (the profile builder's sample). It keeps
// each owner's resident pages now, at the moment the total peaked, and at
// the end, and counts faults on released pages (re-faults).
//
// Per fault the work is one map lookup and one store; a release walks the
// smaller of its range and the process's page table, so reserving or
// unmapping a huge, mostly untouched range costs what was touched.
type Resident struct {
	procs map[uint32]*resProc
	cur   []int64 // resident pages by owner
	huge  []int64 // of which in huge pages
	total int64

	peak      []int64 // resident pages by owner when total peaked
	peakHuge  []int64 // of which in huge pages
	peakTotal int64
	peakTime  uint64
	peakDirty bool // cur still equals the peak (nothing left since)

	ended []int64 // pages exited processes held when they exited
	// spaces are the ended address spaces' own figures (SpacePeaks);
	// endedAt when each pid's last one ended.
	spaces  []SpacePeak
	endedAt map[uint32]uint64

	refaults uint64

	// Snapshots, once set, keeps each process's recent touches for
	// Snapshot (snapshot.go).
	Snapshots bool
	snap      SnapshotStats

	// Timeline (nil unless Timeline was set).
	tl *timeline
}

// resProc is one address space's pages: page number → owner+1, with the
// released bit set once the page was released (0: never resident), the
// huge bit while a huge page maps it, the inherited bit for a page a
// forked child shares with its parent (not the child's own until it
// writes it).
type resProc struct {
	pages map[uint64]uint32
	// cur and peak are the process's own resident pages, now and at its
	// largest.
	cur, peak int64
	// recent are the pages touched since the last snapshot's start, in
	// time order (with Resident.Snapshots).
	recent []touch
}

type touch struct{ page, time uint64 }

const (
	releasedBit  = 1 << 31
	hugeBit      = 1 << 30
	inheritedBit = 1 << 29
	ownerMask    = inheritedBit - 1
)

// NewResident returns an empty tracker; timeline asks it to keep the
// resident pages of every owner over time (TimelinePoints).
func NewResident(timeline bool) *Resident {
	r := &Resident{procs: map[uint32]*resProc{}}
	if timeline {
		r.tl = newTimeline()
	}
	return r
}

func (r *Resident) proc(pid uint32) *resProc {
	p := r.procs[pid]
	if p == nil {
		p = &resProc{pages: map[uint64]uint32{}}
		r.procs[pid] = p
	}
	return p
}

// PageState is what a fault finds at its page.
type PageState uint8

// Page states.
const (
	PageNew      PageState = iota // never resident: a first touch
	PageResident                  // already resident (a second fault on it: COW of the zero page, ...)
	PageReleased                  // resident once, released since: a re-fault
)

// Touch makes the page at addr resident for owner at time t, unless it
// already is; it returns the state it found.
func (r *Resident) Touch(pid uint32, addr, t uint64, owner int) PageState {
	p := r.proc(pid)
	pg := addr / PageSize
	v := p.pages[pg]
	st := PageNew
	switch {
	case v == 0 || v&(inheritedBit|releasedBit) == inheritedBit:
		// Never resident, or a parent's page the child now writes: a
		// copy of its own.
	case v&releasedBit != 0:
		st = PageReleased
		r.refaults++
	default:
		return PageResident
	}
	r.add(p, pg, owner, false, t)
	return st
}

// add makes page pg of p resident for owner at time t.
func (r *Resident) add(p *resProc, pg uint64, owner int, huge bool, t uint64) {
	v := uint32(owner) + 1
	if huge {
		v |= hugeBit
	}
	p.pages[pg] = v
	for len(r.cur) <= owner {
		r.cur = append(r.cur, 0)
		r.huge = append(r.huge, 0)
	}
	r.cur[owner]++
	if huge {
		r.huge[owner]++
	}
	r.total++
	if r.total > r.peakTotal {
		r.peakTotal, r.peakTime, r.peakDirty = r.total, t, true
	}
	if p.cur++; p.cur > p.peak {
		p.peak = p.cur
	}
	if r.Snapshots {
		p.remember(pg, t)
	}
	if r.tl != nil {
		r.tl.fault(t)
		r.tl.set(t, owner, r.cur[owner])
	}
}

// Release makes the pages of [start, end) non-resident at time t; a later
// fault on one is a re-fault.
func (r *Resident) Release(pid uint32, start, end, t uint64) {
	p := r.procs[pid]
	if p == nil || end <= start {
		return
	}
	lo, hi := start/PageSize, (end+PageSize-1)/PageSize
	if hi-lo <= uint64(len(p.pages)) {
		for pg := lo; pg < hi; pg++ {
			if v, ok := p.pages[pg]; ok && v&(releasedBit|inheritedBit) == 0 {
				p.pages[pg] = v&^hugeBit | releasedBit
				r.drop(p, v, t)
			}
		}
		return
	}
	for pg, v := range p.pages {
		if pg >= lo && pg < hi && v&(releasedBit|inheritedBit) == 0 {
			p.pages[pg] = v&^hugeBit | releasedBit
			r.drop(p, v, t)
		}
	}
}

// Move moves the resident pages of [old, old+oldLen) to new (mremap): they
// keep their owners; pages beyond newLen are released.
func (r *Resident) Move(pid uint32, old, oldLen, new, newLen, t uint64) {
	p := r.procs[pid]
	if p == nil || old == new && newLen >= oldLen {
		return
	}
	if newLen < oldLen {
		r.Release(pid, old+newLen, old+oldLen, t)
		oldLen = newLen
	}
	if old == new {
		return
	}
	lo, hi := old/PageSize, (old+oldLen+PageSize-1)/PageSize
	type moved struct {
		pg uint64
		v  uint32
	}
	var ms []moved
	if hi-lo <= uint64(len(p.pages)) {
		for pg := lo; pg < hi; pg++ {
			if v, ok := p.pages[pg]; ok {
				ms = append(ms, moved{pg, v})
			}
		}
	} else {
		for pg, v := range p.pages {
			if pg >= lo && pg < hi {
				ms = append(ms, moved{pg, v})
			}
		}
	}
	for _, m := range ms {
		delete(p.pages, m.pg)
	}
	for _, m := range ms {
		p.pages[m.pg-lo+new/PageSize] = m.v
	}
}

// drop takes the resident page whose value is v from its owner at time t.
func (r *Resident) drop(p *resProc, v uint32, t uint64) {
	if r.peakDirty {
		r.keepPeak()
	}
	owner := int(v&ownerMask) - 1
	r.cur[owner]--
	if v&hugeBit != 0 {
		r.huge[owner]--
	}
	r.total--
	p.cur--
	if r.tl != nil {
		r.tl.set(t, owner, r.cur[owner])
	}
}

// keepPeak copies the owners' pages now as the peak's.
func (r *Resident) keepPeak() {
	r.peak = append(r.peak[:0], r.cur...)
	r.peakHuge = append(r.peakHuge[:0], r.huge...)
	r.peakDirty = false
}

// Exit ends an address space at time t (exit, or exec replacing it): what
// it held counts as held at the end, and its pages stop being resident.
func (r *Resident) Exit(pid uint32, t uint64) { r.end(pid, t, true) }

// Exec replaces pid's address space: its pages stop being resident and do
// not count at the end.
func (r *Resident) Exec(pid uint32, t uint64) { r.end(pid, t, false) }

// end drops pid's resident pages at time t; held counts them as held at
// the end.
func (r *Resident) end(pid uint32, t uint64, held bool) {
	p := r.procs[pid]
	if p == nil {
		return
	}
	held0 := p.cur
	for _, v := range p.pages {
		if v&(releasedBit|inheritedBit) == 0 {
			o := int(v&ownerMask) - 1
			if held {
				for len(r.ended) <= o {
					r.ended = append(r.ended, 0)
				}
				r.ended[o]++
			}
			r.drop(p, v, t)
		}
	}
	if r.endedAt == nil {
		r.endedAt = map[uint32]uint64{}
	}
	r.endedAt[pid] = t
	r.spaces = append(r.spaces, SpacePeak{Pid: pid, Peak: p.peak, End: held0, Time: t, Exec: !held})
	delete(r.procs, pid)
}

// Peak returns owner's resident pages when the total peaked.
func (r *Resident) Peak(owner int) int64 {
	if r.peakDirty {
		r.keepPeak()
	}
	if owner < len(r.peak) {
		return r.peak[owner]
	}
	return 0
}

// HugePeak returns how many of owner's pages at the peak (Peak) huge
// pages mapped.
func (r *Resident) HugePeak(owner int) int64 {
	if r.peakDirty {
		r.keepPeak()
	}
	if owner < len(r.peakHuge) {
		return r.peakHuge[owner]
	}
	return 0
}

// End returns owner's resident pages at the end: held now, plus what the
// processes that exited held at their exit.
func (r *Resident) End(owner int) int64 {
	var n int64
	if owner < len(r.cur) {
		n += r.cur[owner]
	}
	if owner < len(r.ended) {
		n += r.ended[owner]
	}
	return n
}

// PeakPages returns the peak of the total and its time.
func (r *Resident) PeakPages() (pages int64, t uint64) { return r.peakTotal, r.peakTime }

// Refaults counts faults on pages released before.
func (r *Resident) Refaults() uint64 { return r.refaults }

// TimelinePoint is an owner's resident pages from Time on (until its next
// point).
type TimelinePoint struct {
	Time  uint64
	Owner int
	Pages int64
}

// Timeline returns the owners' resident pages over time, in time order, at
// the resolution it kept (Tick ns: points closer than a tick were merged,
// keeping the later), and the faults that made pages resident per tick
// from Start.
func (r *Resident) Timeline() (pts []TimelinePoint, start, tick uint64, faults []uint64) {
	if r.tl == nil {
		return nil, 0, 0, nil
	}
	return r.tl.pts, r.tl.start, r.tl.tick, r.tl.faults
}

// timeline keeps the points at a resolution that coarsens (the tick
// doubles) whenever they would pass maxPoints, so a long recording costs
// bounded memory.
type timeline struct {
	pts      []TimelinePoint
	last     []int // owner → index of its last point in pts (-1: none)
	start    uint64
	tick     uint64
	started  bool
	faults   []uint64
	maxPts   int
	maxTicks int
}

func newTimeline() *timeline {
	return &timeline{tick: 1e6, maxPts: 1 << 20, maxTicks: 1 << 16}
}

func (tl *timeline) tickOf(t uint64) uint64 {
	if !tl.started {
		tl.start, tl.started = t, true
	}
	if t < tl.start {
		return 0
	}
	return (t - tl.start) / tl.tick
}

func (tl *timeline) fault(t uint64) {
	k := tl.tickOf(t)
	for k >= uint64(tl.maxTicks) {
		tl.coarsen()
		k = tl.tickOf(t)
	}
	for uint64(len(tl.faults)) <= k {
		tl.faults = append(tl.faults, 0)
	}
	tl.faults[k]++
}

func (tl *timeline) set(t uint64, owner int, pages int64) {
	for len(tl.last) <= owner {
		tl.last = append(tl.last, -1)
	}
	k := tl.tickOf(t)
	if i := tl.last[owner]; i >= 0 && tl.tickOf(tl.pts[i].Time) == k {
		tl.pts[i].Pages = pages
		return
	}
	tl.last[owner] = len(tl.pts)
	tl.pts = append(tl.pts, TimelinePoint{Time: t, Owner: owner, Pages: pages})
	if len(tl.pts) > tl.maxPts {
		tl.coarsen()
	}
}

// coarsen doubles the tick and merges the points and fault counts that
// now share one.
func (tl *timeline) coarsen() {
	tl.tick *= 2
	out := tl.pts[:0]
	for i := range tl.last {
		tl.last[i] = -1
	}
	for _, p := range tl.pts {
		if j := tl.last[p.Owner]; j >= 0 && tl.tickOf(out[j].Time) == tl.tickOf(p.Time) {
			out[j].Pages = p.Pages
			continue
		}
		tl.last[p.Owner] = len(out)
		out = append(out, p)
	}
	tl.pts = out
	n := (len(tl.faults) + 1) / 2
	for i := 0; i < n; i++ {
		v := tl.faults[2*i]
		if 2*i+1 < len(tl.faults) {
			v += tl.faults[2*i+1]
		}
		tl.faults[i] = v
	}
	tl.faults = tl.faults[:n]
}

// ResidentAt evaluates a timeline at the times ts (ascending): the
// resident pages of every owner at each, from the points Timeline gave.
func ResidentAt(pts []TimelinePoint, owners int, ts []uint64) [][]int64 {
	out := make([][]int64, len(ts))
	cur := make([]int64, owners)
	i := 0
	for k, t := range ts {
		for i < len(pts) && pts[i].Time <= t {
			if pts[i].Owner < owners {
				cur[pts[i].Owner] = pts[i].Pages
			}
			i++
		}
		out[k] = append([]int64(nil), cur...)
	}
	return out
}
