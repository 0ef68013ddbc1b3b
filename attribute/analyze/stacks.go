package analyze

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/binfile"
)

// Recordings of faultline record's shape (the README's "stacks for only
// some allocator calls"; cmd/faultline/internal/recorder's buildSpecs) take every allocator call and fault as a "range" event without a stack,
// and open the same entry tracepoint (or fault event) a second time with a
// DWARF stack for some hits: every big allocation, a 1-in-N sample of the
// others. A stack event is an event whose sample_type has STACK_USER or
// CALLCHAIN while another event with the same type and config has neither;
// that other one is its range event.
//
// The join. The kernel emits both samples of one probe hit on the same
// thread, one right after the other, with identical raw payloads; in time
// order nothing of that thread comes between them, but either may come
// first (the event opened last fires first). So per thread the analysis
// holds a range sample of a twinned event (or a stack sample) until the
// thread's next sample: when that is the other half of the same hit (same
// range event, identical payload) the stack goes to the call; otherwise
// the held range sample is fed without a stack and a held stack sample is
// dropped as unmatched. A stack sample never makes a call of its own.
// Holding an entry delays only its own thread's state; a held fault could
// in principle see another thread's return or free first, which needs
// the program to touch memory being allocated or freed elsewhere within
// microseconds.
//
// An allocation whose entry had no stack gets its exact leaf from the
// entry's top-of-stack words where the recording has them (topLeaf: the
// first caller in the user's code), else from the return probe's
// __probe_ret_ip (symbolize.Session.CallerStack: the call instruction,
// inline chain included); its callers are inferred from the stacks sampled
// at the same leaf (noteCallers, report.Builder.Infer).

// stackBits are the sample_type bits that give a sample a stack.
const stackBits = perfdata.SampleStackUser | perfdata.SampleCallchain

func hasStacks(ev *perfdata.Event) bool { return ev.Attr.SampleType&stackBits != 0 }

// sameEvent reports whether two attrs open the same event source (one
// tracepoint id, one software counter).
func sameEvent(a, b *perfdata.Event) bool {
	return a.Attr.Type == b.Attr.Type && a.Attr.Config == b.Attr.Config
}

// pairStackEvents marks the stack events among infos and their range
// twins. Idempotent: pipe mode calls it again as attrs arrive.
func pairStackEvents(infos []*eventInfo) {
	for i, in := range infos {
		if in.role != RoleAllocEntry && in.role != RoleFault || !hasStacks(in.ev) {
			continue
		}
		for j, r := range infos {
			if j == i || r.role != in.role || hasStacks(r.ev) || !sameEvent(in.ev, r.ev) {
				continue
			}
			in.role, in.stackFor, r.twin = RoleStack, j, true
			in.sampled = in.ev.Attr.SamplePeriod > 1 && in.ev.Attr.Flags&perfdata.AttrFreq == 0
			break
		}
	}
}

const (
	heldNone = iota
	heldRange
	heldStack
)

// held is one thread's sample waiting for the other half of its probe hit.
type held struct {
	state    uint8
	ev       int // the range event's index
	raw      []byte
	addr, ip uint64
	role     Role // of the range event
	// heldRange: the call or fault, ready to feed
	entry attribute.Entry
	fault attribute.Fault
	// heldStack: the stack, unwound on arrival
	stack     attribute.StackID
	callerRet uint64
	inMemset  bool
	sampled   bool
}

// StackJoin counts how stack samples met their calls.
type StackJoin struct {
	Joined    uint64 // stack samples attached to their range sample
	Unmatched uint64 // stack samples whose range sample never came (lost)
	Bare      uint64 // range samples of twinned events fed without a stack
}

func (h *held) samePayload(smp *perfdata.Sample) bool {
	return bytes.Equal(h.raw, smp.Raw) && h.addr == smp.Addr && h.ip == smp.IP
}

func (h *held) keep(ev int, smp *perfdata.Sample) {
	h.ev, h.raw, h.addr, h.ip = ev, append(h.raw[:0], smp.Raw...), smp.Addr, smp.IP
}

// joinSample handles smp for the stack join; it reports whether smp was
// consumed (held, or attached to a held sample).
func (ru *run) joinSample(in *eventInfo, smp *perfdata.Sample) bool {
	idx := smp.Event.Index
	h := ru.held[smp.Tid]
	if h != nil && h.state != heldNone {
		switch {
		case h.state == heldRange && in.role == RoleStack && in.stackFor == h.ev && h.samePayload(smp):
			h.state = heldNone
			ru.join.Joined++
			id, ret := ru.unwind(smp)
			if h.role == RoleFault {
				h.fault.Stack, h.fault.InMemset = id, ru.leafInMemset(id)
				ru.tr.Fault(&h.fault)
				return true
			}
			h.entry.Stack, h.entry.CallerRet = id, ret
			ru.noteCallers(&h.entry, in.sampled)
			ru.tr.Entry(&h.entry)
			return true
		case h.state == heldStack && in.twin && idx == h.ev && h.samePayload(smp):
			h.state = heldNone
			ru.join.Joined++
			if in.role == RoleFault {
				f := ru.faultOf(in, smp)
				f.Stack, f.InMemset = h.stack, h.inMemset
				ru.tr.Fault(f)
				return true
			}
			e := ru.entryOf(in, smp)
			e.Stack, e.CallerRet = h.stack, h.callerRet
			ru.noteCallers(e, h.sampled)
			ru.tr.Entry(e)
			return true
		}
		ru.release(h)
	}
	switch {
	case in.role == RoleStack:
		if h == nil {
			h = &held{}
			ru.held[smp.Tid] = h
		}
		h.state, h.role = heldStack, ru.infos[in.stackFor].role
		h.keep(in.stackFor, smp)
		h.stack, h.callerRet = ru.unwind(smp)
		h.inMemset = h.role == RoleFault && ru.leafInMemset(h.stack)
		h.sampled = in.sampled
		return true
	case in.twin:
		if h == nil {
			h = &held{}
			ru.held[smp.Tid] = h
		}
		h.state, h.role = heldRange, in.role
		h.keep(idx, smp)
		if in.role == RoleFault {
			h.fault = *ru.faultOf(in, smp)
		} else {
			h.entry = *ru.entryOf(in, smp)
		}
		return true
	}
	return false
}

// release settles a held sample whose other half did not come.
func (ru *run) release(h *held) {
	switch h.state {
	case heldRange:
		ru.join.Bare++
		if h.role == RoleFault {
			ru.tr.Fault(&h.fault)
		} else {
			h.entry.Leaf = ru.topLeaf(ru.infos[h.ev], h.entry.Pid, h.entry.Tid, h.raw)
			ru.tr.Entry(&h.entry)
		}
	case heldStack:
		ru.join.Unmatched++
	}
	h.state = heldNone
}

// releaseAll settles every thread's held sample, in thread order (before
// a fork, exit or exec, and at the end).
func (ru *run) releaseAll() {
	if len(ru.held) == 0 {
		return
	}
	tids := make([]uint32, 0, len(ru.held))
	for tid, h := range ru.held {
		if h.state != heldNone {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	for _, tid := range tids {
		ru.release(ru.held[tid])
	}
}

// unwind returns smp's stack and, for an entry probe, the return address
// on top of its stack (0 when unknown or the [uprobes] trampoline: the
// function was tail-called from a probed one, as realloc(NULL, n) jumps
// into malloc).
func (ru *run) unwind(smp *perfdata.Sample) (attribute.StackID, uint64) {
	var ret uint64
	if len(smp.Stack) >= 8 {
		ret = binary.LittleEndian.Uint64(smp.Stack)
		if m := ru.sess.Region(smp.Pid, ret); m != nil && m.File == "[uprobes]" {
			ret = 0
		}
	}
	return ru.stackOf(smp), ret
}

func (ru *run) leafInMemset(id attribute.StackID) bool {
	if st := ru.sess.Stack(symbolize.StackID(id)); len(st) > 0 {
		return ru.inMemset(st[0])
	}
	return false
}

// leafStack is the one-frame stack of a return address, remembered as a
// leaf-only stack for the profile's `stack` label.
func (ru *run) leafStack(pid uint32, ret uint64) attribute.StackID {
	id := attribute.StackID(ru.sess.CallerStack(pid, ret))
	ru.leaves[id] = true
	return id
}

// callerTable counts, per leaf (the one-frame stack of a return address)
// and program, the full stacks sampled there: the callers an allocation
// known only by its leaf is split over. A leaf in a shared library (libc's
// setlocale) is the same location in every process that maps it, so it is
// kept apart per program (the process's comm): a shell's calls there must
// not get the callers sampled in env or python.
type callerTable struct {
	byLeaf map[callerKey]*leafCallers
}

// callerKey is a leaf in one program.
type callerKey struct {
	leaf attribute.StackID
	comm string
}

type leafCallers struct {
	stacks       []attribute.StackID // first-seen order
	all, sampled []uint64
	pos          map[attribute.StackID]int // index into stacks
}

// noteCallers counts a stacked entry's stack at each leaf a call without
// a stack may be given at the same place (topLeaf): every caller frame from
// the first one outside the allocator's wrappers to the first one in the
// user's code, and the return address on top of the stack (the return
// probe's __probe_ret_ip, the fallback), each once. Stacks from a 1-in-N
// stack event are a uniform sample of the small calls that lack a stack;
// those from a filtered every-hit event (big allocations) are used only
// where a leaf has no sampled ones.
func (ru *run) noteCallers(e *attribute.Entry, sampled bool) {
	if !ru.leafMode || e.Stack == 0 {
		return
	}
	var keys [maxChain + 1]attribute.StackID
	chain, _ := ru.callerChain(ru.sess.Stack(symbolize.StackID(e.Stack)))
	n := 0
	for _, loc := range chain {
		keys[n] = ru.leafOf(loc)
		n++
	}
	if e.CallerRet != 0 {
		keys[n] = ru.leafStack(e.Pid, e.CallerRet)
		n++
	}
	comm := ru.sess.Comm(e.Pid)
	for i, k := range keys[:n] {
		if !slices.Contains(keys[:i], k) {
			ru.countCaller(callerKey{k, comm}, e.Stack, sampled)
		}
	}
}

func (ru *run) countCaller(leaf callerKey, stack attribute.StackID, sampled bool) {
	lc := ru.callers.byLeaf[leaf]
	if lc == nil {
		lc = &leafCallers{pos: map[attribute.StackID]int{}}
		ru.callers.byLeaf[leaf] = lc
	}
	// A leaf inside shared code (operator new's return address) collects
	// every stack that passes through it: find them by map, not by scan.
	i, ok := lc.pos[stack]
	if !ok {
		i = len(lc.stacks)
		lc.pos[stack] = i
		lc.stacks = append(lc.stacks, stack)
		lc.all = append(lc.all, 0)
		lc.sampled = append(lc.sampled, 0)
	}
	lc.all[i]++
	if sampled {
		lc.sampled[i]++
	}
}

// leafOf is the one-frame stack of a caller location, remembered as a
// leaf-only stack for the profile's `stack` label.
func (ru *run) leafOf(loc symbolize.LocID) attribute.StackID {
	id := attribute.StackID(ru.sess.CallerStackOf(loc))
	ru.leaves[id] = true
	return id
}

// Location classes for callerChain, cached per location.
const (
	locAllocator = 1 << iota // in the allocator or a wrapper (report.IsAllocator)
	locSystem                // the system's code (report.IsSystemFile, report.IsSystemSource)
	locKnown                 // classified
)

// maxChain bounds the frames between the allocator's wrappers and the
// user's code that are tried as leaves.
const maxChain = 8

// callerChain returns the caller frames of locs (leaf first) from the
// first one outside the allocator and its wrappers (report.IsAllocator,
// the table the profile drops allocator frames by) to the first one in the
// user's code (outside system libraries and the standard library's
// templates: report.IsSystemFile and report.IsSystemSource, the rules the
// summary names sites by), and whether it got there. A leaf inside the
// wrappers (operator new) or the system's code (std::string's out-of-line
// constructor in libstdc++, strdup in libc, vector::_M_realloc_insert) is
// shared by all their callers; the user's frame is where the sites differ,
// and where the frames end before it the last one is the most specific
// leaf known. The chain is empty when the frames end (or reach a frame
// that is not code: the [uprobes] trampoline, an unmapped address) inside
// the wrappers. The slice is reused by the next call.
func (ru *run) callerChain(locs []symbolize.LocID) (chain []symbolize.LocID, user bool) {
	chain = ru.chain[:0]
	defer func() { ru.chain = chain }()
	for _, id := range locs {
		l := ru.sess.Loc(id)
		if !l.Return {
			continue // the probed function itself
		}
		if l.Map == nil || l.Map.File == "[uprobes]" {
			break
		}
		c := ru.locClass(id, l)
		if c&locAllocator != 0 && len(chain) == 0 {
			continue
		}
		if len(chain) == maxChain {
			break
		}
		chain = append(chain, id)
		if c&locSystem == 0 {
			return chain, true
		}
	}
	return chain, false
}

func (ru *run) locClass(id symbolize.LocID, l *symbolize.Loc) uint8 {
	if c := ru.locClasses[id]; c != 0 {
		return c
	}
	if ru.locClasses == nil {
		ru.locClasses = map[symbolize.LocID]uint8{}
	}
	c := uint8(locKnown)
	// The outermost line is the physical function; helpers inlined into
	// malloc count as malloc.
	fs := ru.sess.Lines(id, false)
	f := fs[len(fs)-1]
	if report.IsAllocator(f.Func) || report.IsAllocator(f.System) || report.IsAllocator(f.Symbol) {
		c |= locAllocator
	}
	if report.IsSystemFile(l.Map.File) || systemSourceOnly(fs) {
		c |= locSystem
	}
	ru.locClasses[id] = c
	return c
}

// systemSourceOnly reports whether every line of a location's inline chain
// is in a system header: a template of the standard library instantiated
// in the user's binary (std::vector::_M_realloc_insert), which all its
// callers share. A line without a source file does not count as the
// system's.
func systemSourceOnly(fs []binfile.Frame) bool {
	for _, f := range fs {
		if f.File == "" || !report.IsSystemSource(f.File) {
			return false
		}
	}
	return true
}

// TopStacks counts how allocations recorded without a stack found their
// leaf from the entry probe's top-of-stack words (faultline record's sp,
// bp, s0… fields).
type TopStacks struct {
	Words uint64 // stack words per entry (the most any event has)
	User  uint64 // the walk reached the user's code: an exact leaf there
	// Library: the walk left the allocator's wrappers but ended inside the
	// system's code: the leaf is the last frame it reached there, shared
	// by that code's callers.
	Library uint64
	// Short: the words ended (or the walk stopped) inside the wrappers:
	// the call fell back to its return probe's leaf (a return address
	// inside the wrapper, shared by all its callers).
	Short uint64
}

// topLeaf returns the leaf of an entry recorded without a stack from its
// top-of-stack fields (the last frame of callerChain), or 0 when it has
// none or they do not reach past the allocator's wrappers (the return
// probe's leaf is used then).
func (ru *run) topLeaf(in *eventInfo, pid, tid uint32, raw []byte) attribute.StackID {
	if !ru.leafMode || in.topSP == nil {
		return 0
	}
	ip, _ := in.probeIP.Uint64(raw)
	sp, _ := in.topSP.Uint64(raw)
	var bp uint64
	hasBP := false
	if in.topBP != nil {
		bp, hasBP = in.topBP.Uint64(raw)
	}
	buf := ru.topBuf[:0]
	for _, f := range in.topWords {
		w, ok := f.Uint64(raw)
		if !ok {
			break
		}
		buf = binary.LittleEndian.AppendUint64(buf, w)
	}
	ru.topBuf = buf
	if chain, user := ru.callerChain(ru.sess.UnwindTop(pid, tid, ip, sp, bp, hasBP, buf)); len(chain) > 0 {
		if user {
			ru.top.User++
		} else {
			ru.top.Library++
		}
		return ru.leafOf(chain[len(chain)-1])
	}
	ru.top.Short++
	return 0
}

// weights returns the stacks to split a leaf-only allocation of the
// program comm over.
func (c *callerTable) weights(leaf attribute.StackID, comm string) []report.Weighted {
	lc := c.byLeaf[callerKey{leaf, comm}]
	if lc == nil {
		return nil
	}
	w := lc.all
	if slices.ContainsFunc(lc.sampled, func(n uint64) bool { return n > 0 }) {
		w = lc.sampled
	}
	var out []report.Weighted
	for i, s := range lc.stacks {
		if w[i] > 0 {
			out = append(out, report.Weighted{Stack: s, Weight: w[i]})
		}
	}
	return out
}
