package analyze

import "github.com/faultline/faultline/perfdata"

// Lost allocation events make attribution uncertain near where they were
// lost: a lost entry or return leaves an allocation unknown (its faults go
// unattributed or to a neighbour), a lost free leaves a stale allocation
// that later faults may be credited to. This file finds those windows and
// counts the faults that fell in them, so the summary can say how much of
// the attribution rests on complete data.
//
// The rule. A loss record at time T opens the window [S, T]:
//
//   - PERF_RECORD_LOST says a CPU's ring buffer overflowed. The buffer is
//     shared by every event on that CPU, so any allocation event may be
//     among the lost; S is the time of the last sample delivered from the
//     same CPU before T.
//   - PERF_RECORD_LOST_SAMPLES names the event whose samples were lost; it
//     opens a window only for an allocation event (entry, return or free
//     probe; an unresolved event counts as one), and S is the time of that
//     event's last sample on the same CPU before T.
//
// Without CPU numbers in the records the CPU is ignored (every CPU is one
// stream). With no earlier sample S is the first sample of the recording,
// and a window is never longer than lostMaxWindow (S ≥ T - lostMaxWindow),
// so one idle stream cannot mark the whole recording. A fault is affected
// when its time lies in [S, T + lostGrace] of any window: within the grace
// period after a window it most likely touches memory allocated (or freed)
// in it. A loss record without a time cannot be placed; its count is
// reported as unplaced.
const (
	lostGrace     = 10e6 // ns
	lostMaxWindow = 1e9  // ns
	lostMaxCPU    = 4096 // CPU numbers above this share one stream
)

// LostWindows summarizes where allocation events were lost.
type LostWindows struct {
	Windows  uint64 // loss records that opened a window
	Span     uint64 // summed window lengths T-S, ns (windows may overlap)
	Faults   uint64 // faults that fell in [S, T+10ms] of some window
	Unplaced uint64 // samples lost by loss records without a time
}

// lostTracker implements the rule above in one pass over records in time
// order, keeping only the faults of the last lostMaxWindow, and those in at
// most lostMaxRuns runs: faults at one time are one run, and when there are
// more distinct times than that, runs widen to res nanoseconds (res doubles
// until the runs fit in half the bound). A run counts as in a window when
// its latest fault is, so past lostMaxRuns distinct times in a second,
// Faults may also count faults up to res before a window: it errs towards
// calling attribution uncertain. Memory is bounded whatever the number of
// faults.
type lostTracker struct {
	LostWindows
	haveFirst  bool
	first      uint64
	last       [][]uint64 // [event index + 1][cpu+1]: last sample time; event 0 = any, cpu 0 = any
	seen       [][]bool
	recent     []faultRun // faults in no window yet, in arrival order
	head       int        // recent[head:] is live
	coverUntil uint64     // faults up to this time are in a window
	res        uint64     // a run spans less than res ns; 0: one time per run
}

// faultRun is n faults, in no window yet, at times lo through hi.
type faultRun struct{ lo, hi, n uint64 }

// lostMaxRuns bounds the runs of faults the tracker keeps (24 B each).
const lostMaxRuns = 1 << 14

func lostCPU(id *perfdata.SampleID) int {
	if id.Has&perfdata.SampleCPU == 0 || id.CPU >= lostMaxCPU {
		return 0
	}
	return int(id.CPU) + 1
}

func (l *lostTracker) mark(ev, cpu int, t uint64) {
	for len(l.last) <= ev {
		l.last = append(l.last, nil)
		l.seen = append(l.seen, nil)
	}
	if len(l.last[ev]) <= cpu {
		l.last[ev] = append(l.last[ev], make([]uint64, cpu+1-len(l.last[ev]))...)
		l.seen[ev] = append(l.seen[ev], make([]bool, cpu+1-len(l.seen[ev]))...)
	}
	l.last[ev][cpu], l.seen[ev][cpu] = t, true
}

// sample notes a delivered sample of event index ev (-1: unknown).
func (l *lostTracker) sample(ev int, id *perfdata.SampleID) {
	if id.Has&perfdata.SampleTime == 0 {
		return
	}
	t := id.Time
	if !l.haveFirst {
		l.haveFirst, l.first = true, t
	}
	cpu := lostCPU(id)
	l.mark(0, 0, t)
	if cpu != 0 {
		l.mark(0, cpu, t)
	}
	if ev >= 0 {
		l.mark(ev+1, 0, t)
		if cpu != 0 {
			l.mark(ev+1, cpu, t)
		}
	}
}

// fault notes a fault at time t.
func (l *lostTracker) fault(t uint64) {
	if t <= l.coverUntil && l.Windows > 0 {
		l.Faults++
		return
	}
	if n := len(l.recent); n > l.head && l.joins(&l.recent[n-1], t) {
		r := &l.recent[n-1]
		r.hi, r.n = max(r.hi, t), r.n+1
		return
	}
	// Forget faults no future window can reach.
	for l.head < len(l.recent) && l.recent[l.head].hi+lostMaxWindow < t {
		l.head++
	}
	if l.head > 1024 && l.head > len(l.recent)/2 || len(l.recent) == cap(l.recent) && l.head > 0 {
		n := copy(l.recent, l.recent[l.head:])
		l.recent, l.head = l.recent[:n], 0
	}
	if len(l.recent)-l.head >= lostMaxRuns {
		l.coarsen()
	}
	l.recent = append(l.recent, faultRun{t, t, 1})
}

// joins reports whether a fault at t belongs to run r.
func (l *lostTracker) joins(r *faultRun, t uint64) bool {
	return t == r.hi || l.res > 0 && t >= r.lo && t-r.lo < l.res
}

// coarsen doubles res and merges the runs it joins until at most half of
// lostMaxRuns are left.
func (l *lostTracker) coarsen() {
	for len(l.recent)-l.head > lostMaxRuns/2 {
		l.res = max(2*l.res, 1024)
		live := l.recent[l.head:]
		k := 0
		for _, r := range live {
			if k > 0 && l.joins(&live[k-1], r.hi) && r.lo >= live[k-1].lo {
				live[k-1].hi, live[k-1].n = max(live[k-1].hi, r.hi), live[k-1].n+r.n
				continue
			}
			live[k] = r
			k++
		}
		l.recent = l.recent[:l.head+k]
	}
}

// lost handles a LOST (samples false) or LOST_SAMPLES record with sample id
// id; ev is the index of the event whose samples were lost (-1 when unknown
// or for a buffer loss).
func (l *lostTracker) lost(id *perfdata.SampleID, count uint64, samples bool, ev int) {
	if id.Has&perfdata.SampleTime == 0 || id.Time == 0 {
		l.Unplaced += count
		return
	}
	T := id.Time
	cpu := lostCPU(id)
	key := 0
	if samples && ev >= 0 {
		key = ev + 1
	}
	S := l.first
	if key < len(l.seen) && cpu < len(l.seen[key]) && l.seen[key][cpu] && l.last[key][cpu] <= T {
		S = l.last[key][cpu]
	} else if cpu != 0 && key < len(l.seen) && len(l.seen[key]) > 0 && l.seen[key][0] && l.last[key][0] <= T {
		S = l.last[key][0] // the stream never delivered: fall back to the event on any CPU
	}
	if !l.haveFirst || S > T {
		S = T
	}
	if T-S > lostMaxWindow {
		S = T - lostMaxWindow
	}
	l.Windows++
	l.Span += T - S
	for len(l.recent) > l.head && l.recent[len(l.recent)-1].hi >= S {
		l.Faults += l.recent[len(l.recent)-1].n
		l.recent = l.recent[:len(l.recent)-1]
	}
	l.coverUntil = max(l.coverUntil, T+lostGrace)
}
