package symbolize

import (
	"sort"
	"strings"

	"github.com/faultline/faultline/symbolize/unwind"
)

// How deep a stack copy had to be. A walk that stops at the end of the
// copied user stack (unwind.StopStackEnd) would have reached its root with
// a copy from its SP up to the top of its thread's stack: the highest SP a
// complete walk of the same thread reached (the root frame's, LastSP), or,
// before any walk of the thread was complete, the end of the mapping that
// holds the stack (the [stack] mapping, into which the main thread's stack
// grows down; a thread's own mapping), which over-estimates by what lies
// above the root frame (arguments, environment, thread control block). The
// thread's root counts only when it lies in the mapping that holds the SP:
// a walk from a signal handler's alternate stack or a coroutine's needed
// the copy up to the end of that stack's mapping.

// needBucket is the width of StackNeed's histogram buckets.
const needBucket = 1024

// needBuckets covers the kernel's largest copy (65528 bytes) and one
// bucket more for everything beyond.
const needBuckets = 65536/needBucket + 1

// StackNeed is what the walks that stopped at the end of their copy
// needed.
type StackNeed struct {
	// Walks is how many walks stopped at the end of the copied stack.
	Walks uint64
	// Max is the largest copy one of them needed, in bytes; 0 when none
	// could be told (no mapping above the SP).
	Max uint64
	// Estimated counts the walks whose need came from a mapping's end
	// (no complete walk of the thread yet): over-estimates.
	Estimated uint64
	// Unknown counts the walks whose need could not be told.
	Unknown uint64
	// AtTop counts the walks that stopped at the end of a copy that
	// already reached the top of their stack (a stack with no root frame
	// marked, such as a coroutine's): not in Walks, since a larger copy
	// would not have reached further.
	AtTop uint64
	// hist counts walks by need: bucket i holds needs in
	// ((i)·needBucket, (i+1)·needBucket]; the last one everything beyond.
	hist [needBuckets]uint64
}

// Reaching returns the smallest copy size, a multiple of needBucket, with
// which at least frac of the walks that stopped at the end of their copy
// (those whose need is known) would have reached their root, and how many
// walks that size covers; ok is false when the size would be beyond
// 65536 bytes, the kernel's limit.
func (n *StackNeed) Reaching(frac float64) (size, covered uint64, ok bool) {
	known := n.Walks - n.Unknown
	if known == 0 {
		return 0, 0, true
	}
	for i, c := range n.hist {
		covered += c
		if float64(covered) >= frac*float64(known) {
			if i == needBuckets-1 {
				return 0, covered - c, false
			}
			return uint64(i+1) * needBucket, covered, true
		}
	}
	return 0, covered, false
}

// Within returns how many walks needed at most size bytes, counted by
// whole histogram buckets (a lower bound).
func (n *StackNeed) Within(size uint64) uint64 {
	var c uint64
	for i, h := range n.hist[:needBuckets-1] {
		if uint64(i+1)*needBucket > size {
			break
		}
		c += h
	}
	return c
}

// threadTop is one thread's highest known stack address.
type threadTop struct {
	top uint64 // the root frame's SP of a complete walk; 0 before one
}

func threadKey(pid, tid uint32) uint64 { return uint64(pid)<<32 | uint64(tid) }

// noteDepth counts a walk for StackNeed: a complete one raises its
// thread's top, one that stopped at the end of its copy is put in the
// histogram. Called in record order (Intern); allocates once per thread.
func (s *Session) noteDepth(w *Walk) {
	if !w.hasRegs || w.sp == 0 {
		return
	}
	switch {
	case w.stop.Complete():
		if w.endSP == 0 {
			return
		}
		k := threadKey(w.Pid, w.Tid)
		t := s.tops[k]
		if t == nil {
			t = &threadTop{}
			s.tops[k] = t
		}
		t.top = max(t.top, w.endSP)
	case w.stop == unwind.StopStackEnd:
		n := &s.need
		// The mapping holding the SP, or the [stack] mapping a stack
		// grown since it was recorded lies below.
		m := s.Maps.above(w.Pid, w.sp)
		if m != nil && m.Start > w.sp && !strings.HasPrefix(m.File, "[stack") {
			m = nil
		}
		top, estimated := uint64(0), false
		if t := s.tops[threadKey(w.Pid, w.Tid)]; t != nil && t.top > w.sp && (m == nil || t.top <= m.End) {
			top = t.top
		} else if m != nil {
			// No complete walk of the thread yet, or its root lies on
			// another stack than this SP (a signal handler's alternate
			// stack, a coroutine's).
			top, estimated = m.End, true
		}
		if top > w.sp && top-w.sp <= uint64(len(w.stack)) {
			// The copy reached the top of its stack: a larger one would
			// not have gone further.
			n.AtTop++
			return
		}
		n.Walks++
		if estimated {
			n.Estimated++
		}
		if top <= w.sp {
			n.Unknown++
			return
		}
		need := top - w.sp
		n.Max = max(n.Max, need)
		n.hist[min((need-1)/needBucket, needBuckets-1)]++
	}
}

// above returns pid's mapping containing addr or, when none does, the
// lowest one above it; nil when there is none.
func (m *Maps) above(pid uint32, addr uint64) *Mapping {
	p := m.procs[pid]
	if p == nil {
		return nil
	}
	i := sort.Search(len(p.maps), func(i int) bool { return p.maps[i].End > addr })
	if i == len(p.maps) {
		return nil
	}
	return p.maps[i]
}
