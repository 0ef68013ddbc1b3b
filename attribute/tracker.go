package attribute

import "slices"

// Config tunes the tracker. The zero value is not useful: start from
// DefaultConfig.
type Config struct {
	// FastMax is the largest request flagged fast (glibc's default fastbin
	// limit serves requests up to 120 B; the usual recipe says 128).
	FastMax uint64
	// MmapThreshold is the size from which an allocation is assumed mmap'd
	// when nothing better says so (glibc's default M_MMAP_THRESHOLD).
	MmapThreshold uint64
	// AnonMmapEvents says the recording has anonymous mmap events (perf
	// record -d), so a chunk's own mmap can be seen.
	AnonMmapEvents bool
	// WindowMode attributes each fault to the most recent allocation on the
	// same thread within Window nanoseconds, for recordings without the
	// return probe (no pointers). Approximate.
	WindowMode bool
	Window     uint64
	// MaxLive caps the live allocations tracked across all processes (0:
	// no cap), bounding memory on recordings that leak or lose their free
	// events. At the cap new allocations are still counted (allocs,
	// alloc_space, flags) but not tracked, so faults on them go
	// unattributed; Stats.Untracked counts them. Forked copies beyond the
	// cap are not made either.
	MaxLive int
}

// DefaultConfig returns the defaults the command line documents.
func DefaultConfig() Config {
	return Config{
		FastMax:        128,
		MmapThreshold:  128 << 10,
		AnonMmapEvents: true,
		Window:         10e6,
	}
}

// Stats counts what the tracker saw and what it had to guess.
type Stats struct {
	CallStats
	FaultStats
	Forks, Execs     uint64
	Untracked        uint64 // allocations (and forked copies) not tracked: Config.MaxLive reached
	PendingOverflows uint64 // threads whose faults held for calls in flight hit maxPending
}

// CallStats counts the allocator calls and how they were paired.
type CallStats struct {
	Entries, Returns, Frees uint64
	Allocations             uint64 // allocations created (returns paired with entries, or entries in window mode)
	FailedAllocations       uint64 // returns with a null pointer
	UnpairedEntries         uint64 // entries whose return never came (lost, or thread ended)
	UnpairedReturns         uint64 // returns with no entry in flight on their thread
	RetIPMismatches         uint64 // return's __probe_ret_ip disagreed with the entry's caller
	UnknownFrees            uint64 // frees of pointers not live
	Evicted                 uint64 // allocations ended because a newer one reused their memory
	ChainedReturns          uint64 // returns of an enclosing call that tail-called the allocator (realloc(NULL, n) → malloc)
	MmapByHeader            uint64 // mmap flag decided by the chunk header's IS_MMAPPED bit
	MmapByEvent             uint64 // ... by an anonymous mmap at the chunk's start
	MmapBySize              uint64 // ... by the size threshold (fallback)
}

// FaultStats counts the page faults and how they were attributed.
type FaultStats struct {
	Faults      uint64
	Attributed  uint64 // faults attributed to an allocation
	InFlight    uint64 // of those, taken inside the allocator before its return
	InAllocator uint64 // of those, on the allocator's own heap or arena memory outside the new chunk
	Approx      uint64 // of those, attributed by time window
}

// maxInFlight bounds the allocator calls nested on one thread
// (realloc(NULL, n) calls malloc; operator new calls malloc).
const maxInFlight = 8

// maxPending bounds the faults one thread holds while allocator calls are
// in flight. Past it the calls' returns are taken as lost (a real call
// takes a few faults; a lost return would otherwise hold every later fault
// of the thread until it ends).
const maxPending = 1 << 16

// anonRing is how many recent anonymous mmaps per process are remembered to
// recognise a block the allocator's own call mapped.
const anonRing = 16

// Tracker joins page faults to the allocations whose bytes they touched. Feed
// it events in time order; it reports through a Sink.
type Tracker struct {
	cfg     Config
	sink    Sink
	regions Regions
	spaces  map[uint32]*space
	threads map[uint32]*thread
	spare   []*Allocation // recycled allocations
	stats   Stats
	nlive   int // live allocations in all spaces: liveCount() without the walk

	// OnCredit, when set, is called for each fault an allocation explains
	// at the fault's place in the stream, before the fault may be held for
	// the allocation's flags (Sink.Fault can come much later): resident
	// memory is followed in time order (report.Builder.Touch).
	OnCredit func(f *Fault, a *Allocation)
	// OnEnd, when set, is called as each allocation's life ends (free,
	// memory reused, exec, exit, the end of the stream), after the sink
	// has it.
	OnEnd func(a *Allocation)
}

type space struct {
	live  *liveSet
	anon  [anonRing]struct{ start, end, time uint64 }
	nAnon int
}

type inflight struct {
	Entry
	pendStart int // index into thread.pending where this call's faults begin
}

type thread struct {
	pid      uint32
	calls    [maxInFlight]inflight
	n        int
	pending  []Fault     // faults taken while calls are in flight
	last     *Allocation // window mode: the thread's most recent allocation
	lastTime uint64
	// The thread's last return that made an allocation: realloc(NULL, n)
	// jumps into malloc, so both uretprobes fire on one return, with the
	// same pointer and return address, with no entry in between.
	lastPtr, lastRetIP uint64
	lastKind           AllocKind
}

// NewTracker returns a tracker reporting to sink; regions classes faults
// that no allocation explains (nil: every such fault is [unknown]).
func NewTracker(cfg Config, sink Sink, regions Regions) *Tracker {
	return &Tracker{
		cfg:     cfg,
		sink:    sink,
		regions: regions,
		spaces:  make(map[uint32]*space),
		threads: make(map[uint32]*thread),
	}
}

// Stats returns the counts so far.
func (t *Tracker) Stats() Stats { return t.stats }

// liveCount returns the number of live allocations across all processes.
func (t *Tracker) liveCount() int {
	n := 0
	for _, s := range t.spaces {
		n += s.live.Len()
	}
	return n
}

func (t *Tracker) space(pid uint32) *space {
	s := t.spaces[pid]
	if s == nil {
		s = &space{live: newLiveSet()}
		t.spaces[pid] = s
	}
	return s
}

func (t *Tracker) thread(pid, tid uint32) *thread {
	th := t.threads[tid]
	if th == nil {
		th = &thread{pid: pid}
		t.threads[tid] = th
	} else if th.pid != pid {
		// the tid was reused by another process
		t.dropThread(th)
		th.pid = pid
	}
	return th
}

func (t *Tracker) newAlloc() *Allocation {
	if k := len(t.spare); k > 0 {
		a := t.spare[k-1]
		t.spare = t.spare[:k-1]
		p := a.pending[:0]
		*a = Allocation{pending: p}
		return a
	}
	return &Allocation{}
}

// Entry records an allocator call starting.
func (t *Tracker) Entry(e *Entry) {
	t.stats.Entries++
	th := t.thread(e.Pid, e.Tid)
	if t.cfg.WindowMode {
		t.windowEntry(th, e)
		return
	}
	th.lastPtr, th.lastRetIP = 0, 0 // a chained return has no entry before it
	// A call of the same kind still in flight lost its return.
	for th.n > 0 && th.calls[th.n-1].Kind == e.Kind {
		t.abandonTop(th)
	}
	if th.n == maxInFlight {
		// Deeper than any real allocator nesting: drop the oldest.
		t.stats.UnpairedEntries++
		copy(th.calls[:], th.calls[1:])
		th.n--
	}
	th.calls[th.n] = inflight{Entry: *e, pendStart: len(th.pending)}
	th.n++
}

// abandonTop pops the innermost call as unpaired and attributes the faults
// it had been holding by address alone.
func (t *Tracker) abandonTop(th *thread) {
	t.stats.UnpairedEntries++
	th.n--
	start := th.calls[th.n].pendStart
	for i := start; i < len(th.pending); i++ {
		t.attribute(&th.pending[i])
	}
	th.pending = th.pending[:start]
}

// Return records an allocator call returning ptr.
func (t *Tracker) Return(r *Return) {
	t.stats.Returns++
	if t.cfg.WindowMode {
		return
	}
	th := t.thread(r.Pid, r.Tid)
	i := th.n - 1
	for i >= 0 && th.calls[i].Kind != r.Kind {
		i--
	}
	if i < 0 {
		t.stats.UnpairedReturns++
		return
	}
	for th.n-1 > i {
		t.abandonTop(th)
	}
	call := &th.calls[i]
	if r.RetIP != 0 && call.CallerRet != 0 && r.RetIP != call.CallerRet {
		// Entry and return belong to different calls: events were lost
		// in between. Neither the size nor the stack can be trusted.
		t.stats.RetIPMismatches++
		t.stats.UnpairedReturns++
		t.abandonTop(th)
		return
	}
	th.n--
	pend := th.pending[call.pendStart:]
	th.pending = th.pending[:call.pendStart]
	if r.Ptr != 0 && r.RetIP != 0 && r.Ptr == th.lastPtr && r.RetIP == th.lastRetIP && call.Kind != th.lastKind {
		// The enclosing call's half of a chained return (realloc(NULL, n)
		// tail-calling malloc): the inner call already made this allocation.
		t.stats.ChainedReturns++
		for i := range pend {
			t.attribute(&pend[i])
		}
		return
	}
	th.lastPtr, th.lastRetIP, th.lastKind = r.Ptr, r.RetIP, call.Kind
	if r.Ptr == 0 {
		t.stats.FailedAllocations++
		for i := range pend {
			t.attribute(&pend[i])
		}
		return
	}
	sp := t.space(r.Pid)
	if (call.Kind == KindRealloc || call.Kind == KindReallocArray) && call.OldPtr != 0 {
		if old := removePtr(sp, call.OldPtr); old != nil {
			t.nlive--
			t.end(old)
		}
	}
	a := t.returned(call, r, sp)
	chunk := r.Ptr - 16 // an mmap'd chunk starts at the page, ptr = page + 16
	// glibc's chunk header, or 0 from an allocator that keeps none (see
	// returned).
	glibc, noHeader := r.HasHdr && r.Hdr != 0, r.HasHdr && r.Hdr == 0
	callocZeroed(a)
	t.stats.Allocations++
	// glibc: the chunk's size word at ptr-8 is the allocation's own
	// header; the word before it belongs to the previous chunk's user
	// data unless the chunk is mmap'd, when the whole page is ours. Other
	// allocators' blocks are only their bytes (jemalloc's slab regions
	// touch).
	start := r.Ptr
	if !noHeader {
		start = r.Ptr - 8
	}
	if glibc && a.Flags&FlagMmap != 0 {
		start = chunk
	}
	if t.cfg.MaxLive > 0 && t.nlive >= t.cfg.MaxLive && !t.roomAt(sp, start, r.Ptr+a.Size) {
		t.stats.Untracked++
		for i := range pend {
			t.attribute(&pend[i])
		}
		t.end(a)
		return
	}
	t.insert(sp, start, r.Ptr+a.Size, a, t.evict)
	if a.decided {
		t.report(a)
	}
	t.creditInFlight(a, sp, pend, r)
}

// returned makes the allocation a return completes: the call's kind,
// size and site, the returned pointer, and the flags its size and the way
// its block was mapped give it.
func (t *Tracker) returned(call *inflight, r *Return, sp *space) *Allocation {
	a := t.newAlloc()
	a.Pid, a.Tid, a.Time = call.Pid, call.Tid, call.Time
	a.Kind, a.Size, a.Ptr, a.Site = call.Kind, call.Size, r.Ptr, call.Stack
	if a.Site == 0 {
		a.Site = call.Leaf // an entry without a stack: the exact leaf
	}
	if a.Site == 0 {
		a.Site = r.Leaf // the return address, when the entry could not tell
	}
	a.returned = true
	if a.Size <= t.cfg.FastMax {
		a.Flags |= FlagFast
	}
	chunk := r.Ptr - 16 // an mmap'd chunk starts at the page, ptr = page + 16
	// A chunk header is glibc's and never 0 (a chunk is at least MINSIZE);
	// for other allocators, which keep none, record writes 0 (the
	// in-process shim, and the uprobe method as an immediate). A return
	// without the field is taken as glibc's (perf probe recordings).
	glibc := r.HasHdr && r.Hdr != 0
	switch {
	case glibc:
		t.stats.MmapByHeader++
		if r.Hdr&0x2 != 0 { // IS_MMAPPED
			a.Flags |= FlagMmap
		}
	case t.cfg.AnonMmapEvents:
		// Any allocator: the call itself created the anonymous
		// mapping that holds the block, for the block: glibc's chunk
		// at its start, or a block of at least half of it (the kernel
		// may report a new mapping merged with its neighbours; a
		// small block whose call mapped a whole slab or segment, as
		// jemalloc's and mimalloc's first calls do, is not mmap'd).
		t.stats.MmapByEvent++
		for j := 0; j < sp.nAnon && j < anonRing; j++ {
			m := sp.anon[j]
			if m.time >= call.Time && r.Ptr >= m.start && r.Ptr < m.end && (m.start == chunk || 2*a.Size >= m.end-m.start) {
				a.Flags |= FlagMmap
				break
			}
		}
	default:
		t.mmapBySize(a)
	}
	return a
}

// creditInFlight credits the faults a call took before returning (pend)
// to the allocation a it made, or to the live allocation they touched.
func (t *Tracker) creditInFlight(a *Allocation, sp *space, pend []Fault, r *Return) {
	chunk := r.Ptr - 16 // an mmap'd chunk starts at the page, ptr = page + 16
	noHeader := r.HasHdr && r.Hdr == 0
	// The faults the call took before returning: on the new chunk or on the
	// header malloc writes right after it (splitting the top chunk puts
	// the new top's size word at ptr+chunksize-8, so small allocations
	// fault fresh heap pages there) they are the allocation's own. Other
	// faults on the heap or an arena (sysmalloc's new top, heap_info,
	// tcache setup) were taken serving this call too: they go to it,
	// marked as the allocator's own memory, unless they touched a live
	// allocation.
	inChunk, inChunkEnd := chunk, r.Ptr+chunkSize(a.Size, r.Hdr, r.HasHdr)
	if noHeader {
		inChunk, inChunkEnd = r.Ptr, r.Ptr+a.Size
	}
	for i := range pend {
		f := &pend[i]
		if f.Addr >= inChunk && f.Addr < inChunkEnd {
			f.InFlight = true
			t.stats.InFlight++
			t.credit(a, f, false)
			continue
		}
		if live := sp.live.Find(f.Addr); live != nil {
			t.credit(live, f, true)
			continue
		}
		if t.regions != nil {
			if c := t.regions.Region(f.Pid, f.Addr); c.Kind == ClassHeap || c.Kind == ClassAnon {
				f.InFlight, f.InAllocator = true, true
				t.stats.InFlight++
				t.stats.InAllocator++
				t.credit(a, f, false)
				continue
			}
		}
		t.unattributed(f)
	}
}

// chunkSize is the size glibc's chunk for a request of size bytes spans on
// x86-64, from its header (hdr & ~7) when the return probe recorded it,
// else as glibc rounds a request: request2size, max(MINSIZE=32,
// (size + SIZE_SZ + MALLOC_ALIGN_MASK) & ~MALLOC_ALIGN_MASK). A header
// smaller than the request cannot be this chunk's (events were lost): the
// request then decides.
func chunkSize(size, hdr uint64, hasHdr bool) uint64 {
	if hasHdr {
		if cs := hdr &^ 7; cs >= size+8 && cs-size < 1<<30 {
			return cs
		}
	}
	return max(32, (size+8+15)&^15)
}

// Free records free(ptr).
func (t *Tracker) Free(f *Free) {
	t.stats.Frees++
	if f.Ptr == 0 || t.cfg.WindowMode {
		return
	}
	sp := t.spaces[f.Pid]
	if sp == nil {
		t.stats.UnknownFrees++
		return
	}
	a := removePtr(sp, f.Ptr)
	if a == nil {
		t.stats.UnknownFrees++
		return
	}
	t.nlive--
	t.end(a)
}

// removePtr removes the live allocation whose pointer is ptr: its interval
// starts at ptr-8, or at ptr-16 for an mmap'd chunk.
func removePtr(sp *space, ptr uint64) *Allocation {
	if a := sp.live.Find(ptr - 8); a != nil && a.Ptr == ptr {
		if a.Flags&FlagMmap != 0 {
			return sp.live.Remove(ptr - 16)
		}
		return sp.live.Remove(ptr - 8)
	}
	return nil
}

// insert adds [start, end) to sp's live set, keeping the live count.
func (t *Tracker) insert(sp *space, start, end uint64, a *Allocation, evicted func(*Allocation)) {
	n := sp.live.Len()
	sp.live.Insert(start, end, a, evicted)
	t.nlive += sp.live.Len() - n
}

// roomAt reports whether inserting [start, end) would evict a live
// allocation (memory reused), so the live count would not grow.
func (t *Tracker) roomAt(sp *space, start, end uint64) bool {
	return sp.live.Find(start) != nil || sp.live.Find(end-1) != nil
}

// Mmap records a new mapping [start, start+length) in pid; anon marks
// anonymous memory, which may hold the block of an allocator call in
// flight. An anonymous mapping is remembered without the parts that
// recent anonymous mappings already covered.
func (t *Tracker) Mmap(pid uint32, time, start, length uint64, anon bool) {
	if !anon {
		return
	}
	sp := t.space(pid)
	// The kernel reports a new mapping merged with adjacent anonymous
	// ones (mmap_region's vma_merge): the part an earlier mapping in the
	// ring covers is not new, so it is cut off.
	s, e := start, start+length
	for j := 0; j < sp.nAnon && j < anonRing; j++ {
		m := sp.anon[j]
		if m.start > s && m.start < e {
			e = m.start
		}
		if m.start <= s && m.end > s && m.end < e {
			s = m.end
		}
	}
	sp.anon[sp.nAnon%anonRing] = struct{ start, end, time uint64 }{s, e, time}
	sp.nAnon++
}

// Fault records a page fault.
func (t *Tracker) Fault(f *Fault) {
	t.stats.Faults++
	f.Class, f.InFlight, f.InAllocator, f.Approx = Class{}, false, false, false
	th := t.thread(f.Pid, f.Tid)
	if t.cfg.WindowMode {
		if th.last != nil && f.Time >= th.lastTime && f.Time-th.lastTime <= t.cfg.Window {
			f.Approx = true
			t.stats.Approx++
			t.credit(th.last, f, true)
			return
		}
		t.unattributed(f)
		return
	}
	if th.n > 0 {
		if len(th.pending) < maxPending {
			th.pending = append(th.pending, *f)
			return
		}
		t.stats.PendingOverflows++
		for th.n > 0 {
			t.abandonTop(th)
		}
	}
	t.attribute(f)
}

// Live returns pid's live allocation whose bytes hold addr, or nil.
func (t *Tracker) Live(pid uint32, addr uint64) *Allocation {
	if sp := t.spaces[pid]; sp != nil {
		return sp.live.Find(addr)
	}
	return nil
}

// attribute joins f to the live allocation containing its address.
func (t *Tracker) attribute(f *Fault) {
	if sp := t.spaces[f.Pid]; sp != nil {
		if a := sp.live.Find(f.Addr); a != nil {
			t.credit(a, f, true)
			return
		}
	}
	t.unattributed(f)
}

func (t *Tracker) unattributed(f *Fault) {
	if t.regions != nil {
		f.Class = t.regions.Region(f.Pid, f.Addr)
	}
	t.sink.Fault(f, nil)
}

// credit counts f against a. A fault after the allocation returned decides
// the zero flag; the allocator's own faults do not.
func (t *Tracker) credit(a *Allocation, f *Fault, decides bool) {
	if t.OnCredit != nil {
		t.OnCredit(f, a)
	}
	a.Faults++
	t.stats.Attributed++
	if a.decided {
		t.sink.Fault(f, a)
		return
	}
	if !decides {
		a.pending = append(a.pending, *f)
		return
	}
	if f.InMemset {
		a.Flags |= FlagZero
	}
	a.decided = true
	t.report(a)
	t.sink.Fault(f, a)
}

// report hands a to the sink once its flags are final, with the faults it
// had been holding.
func (t *Tracker) report(a *Allocation) {
	if !a.counted && !a.Inherited {
		a.counted = true
		t.sink.Allocation(a)
	}
	for i := range a.pending {
		t.sink.Fault(&a.pending[i], a)
	}
	a.pending = a.pending[:0]
}

// end finishes a's life and recycles it.
func (t *Tracker) end(a *Allocation) {
	a.decided = true
	t.report(a)
	if t.OnEnd != nil {
		t.OnEnd(a)
	}
	t.spare = append(t.spare, a)
}

func (t *Tracker) evict(a *Allocation) {
	t.stats.Evicted++
	t.end(a)
}

func (t *Tracker) windowEntry(th *thread, e *Entry) {
	if th.last != nil {
		t.end(th.last)
	}
	a := t.newAlloc()
	a.Pid, a.Tid, a.Time, a.Kind, a.Size, a.Site = e.Pid, e.Tid, e.Time, e.Kind, e.Size, e.Stack
	if a.Site == 0 {
		a.Site = e.Leaf
	}
	if a.Size <= t.cfg.FastMax {
		a.Flags |= FlagFast
	}
	t.mmapBySize(a)
	if callocZeroed(a) {
		t.report(a)
	}
	t.stats.Allocations++
	th.last, th.lastTime = a, e.Time
}

// mmapBySize decides FlagMmap from the size alone: glibc serves requests
// from the mmap threshold up with mmap.
func (t *Tracker) mmapBySize(a *Allocation) {
	t.stats.MmapBySize++
	if a.Size >= t.cfg.MmapThreshold {
		a.Flags |= FlagMmap
	}
}

// callocZeroed marks a calloc'd allocation zeroed, which decides it at once.
func callocZeroed(a *Allocation) bool {
	if a.Kind != KindCalloc {
		return false
	}
	a.Flags |= FlagZero
	a.decided = true
	return true
}

// Fork records pid forking child. A new thread (child == pid) shares the
// address space; a new process gets a copy of the parent's live
// allocations, so its copy-on-write faults count against the parent's sites.
func (t *Tracker) Fork(pid, child uint32) {
	if child == pid {
		return
	}
	t.stats.Forks++
	if old := t.spaces[child]; old != nil {
		t.nlive -= old.live.Len()
		old.live.Clear(t.end)
	}
	parent := t.spaces[pid]
	if parent == nil {
		delete(t.spaces, child)
		return
	}
	cs := &space{live: newLiveSet()}
	parent.live.Each(func(start, end uint64, pa *Allocation) {
		if t.cfg.MaxLive > 0 && t.nlive >= t.cfg.MaxLive {
			t.stats.Untracked++
			return
		}
		a := t.newAlloc()
		p := a.pending
		*a = *pa
		a.pending = p[:0]
		a.Pid, a.Faults = child, 0
		a.Inherited, a.decided, a.counted = true, true, true
		t.insert(cs, start, end, a, nil)
	})
	t.spaces[child] = cs
}

// Exec records pid replacing its program: its allocations end.
func (t *Tracker) Exec(pid uint32) {
	t.stats.Execs++
	t.endSpace(pid)
	for _, tid := range sortedKeys(t.threads) {
		if th := t.threads[tid]; th.pid == pid {
			t.dropThread(th)
		}
	}
}

// Exit records thread tid of pid ending; when the main thread (tid == pid)
// exits the process's allocations end.
func (t *Tracker) Exit(pid, tid uint32) {
	if th := t.threads[tid]; th != nil {
		t.dropThread(th)
		delete(t.threads, tid)
	}
	if pid == tid {
		t.endSpace(pid)
	}
}

func (t *Tracker) endSpace(pid uint32) {
	if sp := t.spaces[pid]; sp != nil {
		t.nlive -= sp.live.Len()
		sp.live.Clear(t.end)
		delete(t.spaces, pid)
	}
}

// dropThread settles a thread's calls in flight and its window allocation.
func (t *Tracker) dropThread(th *thread) {
	for th.n > 0 {
		t.abandonTop(th)
	}
	if th.last != nil {
		t.end(th.last)
		th.last = nil
	}
}

// Close settles everything still open at the end of the stream: calls in
// flight are unpaired, live allocations are reported.
func (t *Tracker) Close() {
	for _, tid := range sortedKeys(t.threads) {
		t.dropThread(t.threads[tid])
	}
	for _, pid := range sortedKeys(t.spaces) {
		t.endSpace(pid)
	}
}

// sortedKeys keeps the sink's view deterministic where we walk a map.
func sortedKeys[V any](m map[uint32]V) []uint32 {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
