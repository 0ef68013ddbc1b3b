package analyze

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
)

// snapFields are the fields of faultline:resident.
type snapFields struct {
	scalar [7]*perfdata.TraceField
	ranges *perfdata.TraceField
}

// snapshotInfo classifies faultline:resident.
func snapshotInfo(in *eventInfo) bool {
	ev := in.ev
	if ev.Format == nil || ev.Format.System != schema.System || ev.Format.Name != schema.SnapshotEvent {
		return false
	}
	sf := &snapFields{ranges: field(ev, schema.SnapshotRanges)}
	for i, n := range schema.SnapshotFields {
		if sf.scalar[i] = field(ev, n); sf.scalar[i] == nil {
			return true
		}
	}
	if sf.ranges != nil && sf.ranges.Dynamic {
		in.role, in.snap = RoleSnapshot, sf
	}
	return true
}

// SnapshotSummary is what the page-table snapshots said.
type SnapshotSummary struct {
	// Records and Snapshots count the records and the snapshots (a
	// process at one time) read; Exits the snapshots taken at an exit.
	Records, Snapshots, Exits uint64
	// Tracked and Held are, at the snapshot that held the most, what the
	// faults had made resident in that process and what its page tables
	// held (bytes); MaxOff is the largest difference at any snapshot, in
	// bytes, and MaxOffHeld what that snapshot held.
	Tracked, Held      int64
	MaxOff, MaxOffHeld int64
	// Added and Removed are the bytes the snapshots found resident that
	// no fault had made so, and the bytes the faults had made resident
	// that they found gone.
	Added, Removed int64
}

// snapState gathers one snapshot's records (those of one pid and time).
type snapState struct {
	pid           uint32
	time          uint64
	tracked, held int64
	sum           SnapshotSummary
	ranges        []attribute.SnapRange
	hwm, anon     map[uint32]int64
	exit          bool
	// points are the snapshots taken, for the timeline (at most
	// maxSnapPoints).
	points []SnapshotPoint
}

// SnapshotPoint is one snapshot: when, of which process, what its page
// tables held of its own (bytes), and whether it was taken at its exit.
type SnapshotPoint struct {
	Time uint64
	Pid  uint32
	Held int64
	Exit bool
}

// maxSnapPoints bounds the points kept for the timeline: a long
// recording of many processes keeps the first ones.
const maxSnapPoints = 1 << 16

// snapshotSample applies one faultline:resident record to the resident
// pages.
func (ru *run) snapshotSample(in *eventInfo, smp *perfdata.Sample) {
	sf := in.snap
	var v [7]uint64
	for i, f := range sf.scalar {
		v[i], _ = f.Uint64(smp.Raw)
	}
	raw, ok := sf.ranges.Bytes(smp.Raw)
	if !ok {
		return
	}
	pid, kind, begin, lo, hi, hwm, anon := uint32(v[0]), v[1], v[2], v[3], v[4], int64(v[5]), int64(v[6])
	ss := &ru.snap
	if ss.hwm == nil {
		ss.hwm, ss.anon = map[uint32]int64{}, map[uint32]int64{}
	}
	ss.hwm[pid], ss.anon[pid] = max(ss.hwm[pid], hwm), max(ss.anon[pid], anon)
	rs := ss.ranges[:0]
	for len(raw) >= 24 {
		s, e, fl := binary.NativeEndian.Uint64(raw), binary.NativeEndian.Uint64(raw[8:]), binary.NativeEndian.Uint64(raw[16:])
		raw = raw[24:]
		if fl&schema.SnapPresent != 0 && s < e && e-s < 1<<48 {
			rs = append(rs, attribute.SnapRange{Start: s, End: e, Huge: fl&schema.SnapHuge != 0})
		}
	}
	ss.ranges = rs
	if ss.sum.Records == 0 || pid != ss.pid || smp.Time != ss.time {
		ss.finish()
		ss.pid, ss.time, ss.exit = pid, smp.Time, kind == schema.SnapshotExit
		ss.sum.Snapshots++
		if kind == schema.SnapshotExit {
			ss.sum.Exits++
		}
	}
	ss.sum.Records++
	before, after := ru.b.Res.Snapshot(pid, begin, smp.Time, lo, hi, rs, ru.ownerAt)
	ss.tracked += before * attribute.PageSize
	ss.held += after * attribute.PageSize
}

// finish closes the snapshot gathered so far.
func (ss *snapState) finish() {
	if ss.sum.Records > 0 && len(ss.points) < maxSnapPoints {
		ss.points = append(ss.points, SnapshotPoint{Time: ss.time, Pid: ss.pid, Held: ss.held, Exit: ss.exit})
	}
	if ss.held > ss.sum.Held {
		ss.sum.Held, ss.sum.Tracked = ss.held, ss.tracked
	}
	if off := ss.held - ss.tracked; max(off, -off) > max(ss.sum.MaxOff, -ss.sum.MaxOff) {
		ss.sum.MaxOff, ss.sum.MaxOffHeld = off, ss.held
	}
	ss.tracked, ss.held = 0, 0
}

// summary returns what the snapshots said.
func (ss *snapState) summary(res *attribute.Resident) *SnapshotSummary {
	if ss.sum.Records == 0 {
		return nil
	}
	ss.finish()
	s := ss.sum
	st := res.SnapshotStats()
	s.Added, s.Removed = st.Added*attribute.PageSize, st.Removed*attribute.PageSize
	return &s
}

// ownerAt names the owner of a resident page no fault was seen making so:
// the live allocation that holds it, else the program's own mapping, else
// the class of memory it is in.
func (ru *run) ownerAt(pid uint32, addr uint64) int {
	if a := ru.tr.Live(pid, addr); a != nil {
		return ru.b.Owner(pid, a, "")
	}
	if m := ru.mm.find(pid, addr); m != nil {
		return ru.b.Owner(pid, &m.site.alloc, "")
	}
	return ru.b.Owner(pid, nil, regions{ru.sess}.Region(pid, addr).String())
}

// allocEnd adds an allocation's untouched bytes as its life ends: those
// of its whole pages that are not resident then. An allocation smaller
// than a page shares its pages with others and counts as touched.
func (ru *run) allocEnd(a *attribute.Allocation) {
	if a.Size < attribute.PageSize || a.Ptr == 0 {
		return
	}
	held := ru.b.Res.ResidentBytes(a.Pid, a.Ptr, a.Ptr+a.Size)
	ru.b.Untouched(a, int64(a.Size-held))
}

// processes fills in the per-process figures: the recorded program's own
// tracked peak, and with several address spaces each one's.
func (ru *run) processes(rs *ResidentSummary) {
	spaces := ru.b.Res.SpacePeaks()
	byPid := map[uint32]*ProcessResident{}
	var list []*ProcessResident
	for _, sp := range spaces {
		if sp.Peak == 0 {
			continue
		}
		// An exec starts a new address space under the same pid: the
		// kernel's figures restart with it, ours are kept per pid as
		// the largest.
		pr := byPid[sp.Pid]
		if pr == nil {
			pr = &ProcessResident{Pid: sp.Pid, Comm: ru.sess.Comm(sp.Pid)}
			byPid[sp.Pid] = pr
			list = append(list, pr)
		}
		pr.PeakBytes = max(pr.PeakBytes, sp.Peak*attribute.PageSize)
		pr.EndBytes = sp.End * attribute.PageSize
		pr.HWM, pr.Anon = ru.snap.hwm[sp.Pid], ru.snap.anon[sp.Pid]
	}
	if len(list) == 0 {
		return
	}
	own := list[0]
	for _, pr := range list {
		if pr.Pid == ru.mm.pid || ru.mm.pid == 0 && pr.PeakBytes > own.PeakBytes {
			own = pr
		}
	}
	rs.OwnPeakBytes = own.PeakBytes
	// The page-table reads' RssAnon can be above the one sampled every
	// 10 ms (faultline:rss), which misses a peak between two reads.
	rs.ProcessHWM, rs.ProcessAnon = max(rs.ProcessHWM, own.HWM), max(rs.ProcessAnon, own.Anon)
	if len(list) < 2 {
		return
	}
	for _, pr := range list {
		rs.Processes = append(rs.Processes, *pr)
	}
	slices.SortStableFunc(rs.Processes, func(a, b ProcessResident) int { return cmp.Compare(b.PeakBytes, a.PeakBytes) })
}
