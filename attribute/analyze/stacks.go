package analyze

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
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
//
// The type stacks does all of this between the decoding of a sample and
// the tracker: the run hands it every entry and fault (decoded, their own
// stacks unwound) and every stack sample, and it feeds them on, joined,
// through a feed. Its state is its own.

// feed takes the calls and faults the join lets through, stacks and leaves
// attached, in the order they happened: an attribute.Tracker.
type feed interface {
	Entry(*attribute.Entry)
	Fault(*attribute.Fault)
}

// stacks is the stack join, the leaf inference and the caller weights of
// one run. Every sample of the run goes first through settle; then entries
// through entry, faults through fault and stack samples through stack.
type stacks struct {
	// fr is read for stacks and locations (to classify leaves and count
	// callers), the one-frame stacks of leaves, programs' names and the
	// walk of top stack words. A *symbolize.Session, not an interface:
	// its Stack and Loc lookups run per frame and must inline.
	fr  *symbolize.Session
	out feed
	// leafMode: some allocator entry event has no stacks, so calls get
	// leaves and callers are counted (stackless).
	leafMode bool
	held     map[uint32]*held
	cur      *held // the current sample's thread's, found by settle (nil: none yet)
	join     StackJoin
	top      TopStacks
	leaves   map[attribute.StackID]bool // one-frame stacks made from return addresses
	callers  map[callerKey]*leafCallers
	// classes and memset cache per location callerChain's classes and
	// whether a fault's leaf is in the memset family.
	classes map[symbolize.LocID]uint8
	memset  map[symbolize.LocID]bool
	chain   []symbolize.LocID // callerChain's result
	topBuf  []byte            // the stack words of the entry being walked
}

func newStacks(fr *symbolize.Session) *stacks {
	return &stacks{fr: fr, held: map[uint32]*held{}, leaves: map[attribute.StackID]bool{}, callers: map[callerKey]*leafCallers{},
		classes: map[symbolize.LocID]uint8{}, memset: map[symbolize.LocID]bool{}}
}

// stackless notes an allocator entry event without stacks: its calls get
// leaves (from its top stack words, if it has them) and callers.
func (s *stacks) stackless(in *eventInfo) {
	s.leafMode = true
	s.top.Words = max(s.top.Words, uint64(len(in.topWords)))
}

// kind is the profile's `stack` label of a stack: a leaf alone, or sampled.
func (s *stacks) kind(id attribute.StackID) string {
	if s.leaves[id] {
		return report.StackLeaf
	}
	return report.StackSampled
}

const (
	heldNone = iota
	heldRange
	heldStack
)

// held is one thread's sample waiting for the other half of its probe hit.
type held struct {
	state    uint8
	in       *eventInfo // the range event
	ev       int        // its index
	raw      []byte
	addr, ip uint64
	// heldRange: the call or fault, ready to feed
	entry attribute.Entry
	fault attribute.Fault
	// heldStack: the stack, unwound on arrival
	stack     attribute.StackID
	callerRet uint64
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

// otherHalf reports whether smp, a sample of in, is the other half of the
// probe hit h holds.
func (h *held) otherHalf(in *eventInfo, smp *perfdata.Sample) bool {
	switch h.state {
	case heldRange:
		return in.role == RoleStack && in.stackFor == h.ev && h.samePayload(smp)
	case heldStack:
		return in.twin && smp.Event.Index == h.ev && h.samePayload(smp)
	}
	return false
}

// settle comes first for every sample smp (of event in): it releases the
// thread's held sample unless smp is its other half, so that entry, fault
// and stack, called next for the same sample, find held only that.
func (s *stacks) settle(in *eventInfo, smp *perfdata.Sample) {
	s.cur = nil
	if len(s.held) == 0 {
		return
	}
	h := s.held[smp.Tid]
	if h != nil && h.state != heldNone && !h.otherHalf(in, smp) {
		s.release(h)
	}
	s.cur = h
}

// hold keeps smp, a sample of the range event in (index ev) or of its stack
// event, as tid's held sample.
func (s *stacks) hold(state uint8, in *eventInfo, ev int, smp *perfdata.Sample) *held {
	h := s.cur
	if h == nil {
		h = &held{}
		s.held[smp.Tid] = h
	}
	h.state, h.in, h.ev = state, in, ev
	h.raw, h.addr, h.ip = append(h.raw[:0], smp.Raw...), smp.Addr, smp.IP
	return h
}

// joined returns the thread's held sample in state, which settle left
// only when it is the other half of the sample now arriving; nil when
// there is none.
func (s *stacks) joined(state uint8) *held {
	h := s.cur
	if h == nil || h.state != state {
		return nil
	}
	h.state = heldNone
	s.join.Joined++
	return h
}

// entry feeds e, an allocator entry decoded from smp (a sample of in; its
// own stack unwound into it when unwound): joined to its held stack
// sample, held until its stack sample comes when in has a stack twin, else
// with its leaf from its top stack words when its stack was not unwound.
func (s *stacks) entry(in *eventInfo, smp *perfdata.Sample, e *attribute.Entry, unwound bool) {
	if in.twin {
		if h := s.joined(heldStack); h != nil {
			e.Stack, e.CallerRet = h.stack, h.callerRet
			s.noteCallers(e, h.sampled)
			s.out.Entry(e)
			return
		}
		s.hold(heldRange, in, smp.Event.Index, smp).entry = *e
		return
	}
	if !unwound {
		e.Leaf = s.topLeaf(in, e.Pid, e.Tid, smp.Raw)
	}
	s.out.Entry(e)
}

// fault feeds f, a fault decoded from smp (a sample of in, its stack
// unwound when in has stacks): joined to its held stack sample, held until
// its stack sample comes when in has a stack twin, else as it is.
func (s *stacks) fault(in *eventInfo, smp *perfdata.Sample, f *attribute.Fault) {
	if in.twin {
		if h := s.joined(heldStack); h != nil {
			f.Stack, f.InMemset = h.stack, s.leafInMemset(h.stack)
			s.out.Fault(f)
			return
		}
		s.hold(heldRange, in, smp.Event.Index, smp).fault = *f
		return
	}
	if f.Stack != 0 {
		f.InMemset = s.leafInMemset(f.Stack)
	}
	s.out.Fault(f)
}

// stack takes smp, a sample of the stack event in whose range event is rng,
// with its stack id and the return address on top of it: it goes to the
// held range sample it is the other half of, else it is held for it.
func (s *stacks) stack(in, rng *eventInfo, smp *perfdata.Sample, id attribute.StackID, ret uint64) {
	if h := s.joined(heldRange); h != nil {
		if h.in.role == RoleFault {
			h.fault.Stack, h.fault.InMemset = id, s.leafInMemset(id)
			s.out.Fault(&h.fault)
			return
		}
		h.entry.Stack, h.entry.CallerRet = id, ret
		s.noteCallers(&h.entry, in.sampled)
		s.out.Entry(&h.entry)
		return
	}
	h := s.hold(heldStack, rng, in.stackFor, smp)
	h.stack, h.callerRet, h.sampled = id, ret, in.sampled
}

// release settles a held sample whose other half did not come.
func (s *stacks) release(h *held) {
	switch h.state {
	case heldRange:
		s.join.Bare++
		if h.in.role == RoleFault {
			s.out.Fault(&h.fault)
		} else {
			h.entry.Leaf = s.topLeaf(h.in, h.entry.Pid, h.entry.Tid, h.raw)
			s.out.Entry(&h.entry)
		}
	case heldStack:
		s.join.Unmatched++
	}
	h.state = heldNone
}

// releaseAll settles every thread's held sample, in thread order (before
// a fork, exit or exec, and at the end).
func (s *stacks) releaseAll() {
	if len(s.held) == 0 {
		return
	}
	tids := make([]uint32, 0, len(s.held))
	for tid, h := range s.held {
		if h.state != heldNone {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	for _, tid := range tids {
		s.release(s.held[tid])
	}
}

// exit forgets thread tid, settled by releaseAll before: tids are reused.
func (s *stacks) exit(tid uint32) {
	delete(s.held, tid)
	s.cur = nil
}

// leafInMemset reports whether a stack's leaf is in the memset family.
func (s *stacks) leafInMemset(id attribute.StackID) bool {
	if st := s.fr.Stack(symbolize.StackID(id)); len(st) > 0 {
		return s.inMemset(st[0])
	}
	return false
}

// inMemset reports whether a leaf location is in the memset family; cached
// per location.
func (s *stacks) inMemset(id symbolize.LocID) bool {
	if v, ok := s.memset[id]; ok {
		return v
	}
	v := false
	for _, f := range s.fr.Lines(id, false) {
		if isMemsetFamily(f.Func) || isMemsetFamily(f.Symbol) {
			v = true
			break
		}
	}
	s.memset[id] = v
	return v
}

// isMemsetFamily reports whether a function name is memset or one of its
// variants: a fault inside one sets the zero flag of its allocation.
func isMemsetFamily(name string) bool {
	return name == "memset" || name == "bzero" || name == "explicit_bzero" ||
		strings.HasPrefix(name, "__memset") || strings.HasPrefix(name, "__bzero") ||
		strings.HasPrefix(name, "__GI_memset") || strings.HasPrefix(name, "__explicit_bzero")
}

// returnLeaf is the leaf of an allocation from its return probe's
// __probe_ret_ip in pid, when the run infers leaves (else 0).
func (s *stacks) returnLeaf(pid uint32, ret uint64) attribute.StackID {
	if !s.leafMode || ret == 0 {
		return 0
	}
	return s.leafStack(pid, ret)
}

// leafStack is the one-frame stack of a return address, remembered as a
// leaf-only stack for the profile's `stack` label.
func (s *stacks) leafStack(pid uint32, ret uint64) attribute.StackID {
	id := attribute.StackID(s.fr.CallerStack(pid, ret))
	s.leaves[id] = true
	return id
}

// callerKey is a leaf in one program. stacks.callers counts, per leaf (the
// one-frame stack of a return address) and program, the full stacks
// sampled there: the callers an allocation known only by its leaf is split
// over. A leaf in a shared library (libc's setlocale) is the same location
// in every process that maps it, so it is kept apart per program (the
// process's comm): a shell's calls there must not get the callers sampled
// in env or python.
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
func (s *stacks) noteCallers(e *attribute.Entry, sampled bool) {
	if !s.leafMode || e.Stack == 0 {
		return
	}
	var keys [maxChain + 1]attribute.StackID
	chain, _ := s.callerChain(s.fr.Stack(symbolize.StackID(e.Stack)))
	n := 0
	for _, loc := range chain {
		keys[n] = s.leafOf(loc)
		n++
	}
	if e.CallerRet != 0 {
		keys[n] = s.leafStack(e.Pid, e.CallerRet)
		n++
	}
	comm := s.fr.Comm(e.Pid)
	for i, k := range keys[:n] {
		if !slices.Contains(keys[:i], k) {
			s.countCaller(callerKey{k, comm}, e.Stack, sampled)
		}
	}
}

func (s *stacks) countCaller(leaf callerKey, stack attribute.StackID, sampled bool) {
	lc := s.callers[leaf]
	if lc == nil {
		lc = &leafCallers{pos: map[attribute.StackID]int{}}
		s.callers[leaf] = lc
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
func (s *stacks) leafOf(loc symbolize.LocID) attribute.StackID {
	id := attribute.StackID(s.fr.CallerStackOf(loc))
	s.leaves[id] = true
	return id
}

// Location classes for callerChain, cached per location.
const (
	locAllocator = 1 << iota // in the allocator or a wrapper (report.IsAllocator)
	locSystem                // the system's code (schema.IsSystemFile, report.IsSystemSource)
	locKnown                 // classified
)

// maxChain bounds the frames between the allocator's wrappers and the
// user's code that are tried as leaves.
const maxChain = 8

// callerChain returns the caller frames of locs (leaf first) from the
// first one outside the allocator and its wrappers (report.IsAllocator,
// the table the profile drops allocator frames by) to the first one in the
// user's code (outside system libraries and the standard library's
// templates: schema.IsSystemFile and report.IsSystemSource, the rules the
// summary names sites by), and whether it got there. A leaf inside the
// wrappers (operator new) or the system's code (std::string's out-of-line
// constructor in libstdc++, strdup in libc, vector::_M_realloc_insert) is
// shared by all their callers; the user's frame is where the sites differ,
// and where the frames end before it the last one is the most specific
// leaf known. The chain is empty when the frames end (or reach a frame
// that is not code: the [uprobes] trampoline, an unmapped address) inside
// the wrappers. The slice is reused by the next call.
func (s *stacks) callerChain(locs []symbolize.LocID) (chain []symbolize.LocID, user bool) {
	chain = s.chain[:0]
	defer func() { s.chain = chain }()
	for _, id := range locs {
		l := s.fr.Loc(id)
		if !l.Return {
			continue // the probed function itself
		}
		if l.Map == nil || l.Map.File == "[uprobes]" {
			break
		}
		c := s.locClass(id, l)
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

func (s *stacks) locClass(id symbolize.LocID, l *symbolize.Loc) uint8 {
	if c := s.classes[id]; c != 0 {
		return c
	}
	if s.classes == nil {
		s.classes = map[symbolize.LocID]uint8{}
	}
	c := uint8(locKnown)
	// The outermost line is the physical function; helpers inlined into
	// malloc count as malloc.
	fs := s.fr.Lines(id, false)
	f := fs[len(fs)-1]
	if report.IsAllocator(f.Func) || report.IsAllocator(f.System) || report.IsAllocator(f.Symbol) {
		c |= locAllocator
	}
	if schema.IsSystemFile(l.Map.File) || systemSourceOnly(fs) {
		c |= locSystem
	}
	s.classes[id] = c
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
func (s *stacks) topLeaf(in *eventInfo, pid, tid uint32, raw []byte) attribute.StackID {
	if !s.leafMode || in.topSP == nil {
		return 0
	}
	ip, _ := in.probeIP.Uint64(raw)
	sp, _ := in.topSP.Uint64(raw)
	var bp uint64
	hasBP := false
	if in.topBP != nil {
		bp, hasBP = in.topBP.Uint64(raw)
	}
	buf := s.topBuf[:0]
	for _, f := range in.topWords {
		w, ok := f.Uint64(raw)
		if !ok {
			break
		}
		buf = binary.LittleEndian.AppendUint64(buf, w)
	}
	s.topBuf = buf
	if chain, user := s.callerChain(s.fr.UnwindTop(pid, tid, ip, sp, bp, hasBP, buf)); len(chain) > 0 {
		if user {
			s.top.User++
		} else {
			s.top.Library++
		}
		return s.leafOf(chain[len(chain)-1])
	}
	s.top.Short++
	return 0
}

// weights returns the stacks to split a leaf-only allocation of the
// program comm over.
func (s *stacks) weights(leaf attribute.StackID, comm string) []report.Weighted {
	lc := s.callers[callerKey{leaf, comm}]
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
