package symbolize

import (
	"sync"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize/internal/cfi"
	"github.com/faultline/faultline/symbolize/unwind"
)

// Parallel unwinding. A stack walk has three parts with different needs:
//
//   - preparing it (prewalker.Prepare) reads the sample and the return
//     addresses noted at uprobe entries, which depend on every earlier
//     sample of the thread: it runs in record order;
//   - walking it (walker.Walk), the costly part (CFI lookup and stepping),
//     needs only the process's code mappings at the sample's time and
//     runs on any goroutine;
//   - interning it (Session.Intern) hands out location and stack IDs in
//     first-seen order: it runs in record order again.
//
// So the IDs, and every profile built from them, are the same for any
// number of walkers. Each walker has its own replica of the code mappings
// and its own CFI row cache, so walks share nothing but the opened
// binaries, which are loaded under Session.infoMu. A replica follows the
// recording through the prewalker's log of mapping changes: each prepared
// walk carries the log's length at its sample (Walk.version) and the
// walker applies the changes up to there before walking it, so a walk
// sees the mappings of its sample's time without the reader ever waiting
// for running walks: a mapping change is never a barrier.

// Walk is one sample's stack walk. Its slices are reused from walk to walk.
type Walk struct {
	Pid, Tid uint32

	regs      unwind.Regs
	sp        uint64
	hasRegs   bool
	stack     []byte
	stackBuf  []byte   // owned copy of the stack when the sample's bytes are not stable
	callchain []uint64 // the sample's callchain (owned copy in pipelines)
	user      []uint64 // the user part of callchain
	tramps    []trampEntry
	// entry: a pipeline's walk of a uprobe entry sample, whose return
	// address Session.Intern notes again, in order, for UnwindTop.
	entry bool
	// version is the prewalker's log length when the walk was prepared.
	version int

	frames []unwind.Frame
	stop   unwind.Stop
	endSP  uint64 // the last frame's SP (unwind.Unwinder.LastSP); 0 when unknown
	hash   uint64 // of frames, for Session.Intern's cache
}

// prepare takes what the walk needs from smp, whose registers are arch's.
// With own set the callchain is copied (the reader reuses its decoded
// slices); otherwise it and the stack are referenced.
func (w *Walk) prepare(smp *perfdata.Sample, own bool, arch unwind.Arch) {
	w.Pid, w.Tid = smp.Pid, smp.Tid
	cc := smp.Callchain
	if own {
		w.callchain = append(w.callchain[:0], cc...)
		cc = w.callchain
	} else {
		w.callchain = cc
	}
	w.user = nil
	for i, pc := range cc {
		if pc == perfdata.ContextUser {
			w.user = cc[i+1:]
			break
		}
	}
	w.hasRegs = smp.RegsABI != 0 && len(smp.Regs) > 0
	w.stack = smp.Stack
	if w.hasRegs {
		w.regs = unwind.RegsFromPerf(arch, smp.RegsMask, smp.Regs)
		w.sp, _ = w.regs.SP(arch)
	}
}

// walk unwinds with u over res.
func (w *Walk) walk(u *unwind.Unwinder, res unwind.Resolver) {
	w.walkFrames(u, res)
	// FNV-1a over the frames, a word at a time: hashed here, on the
	// walker, so the in-order interning only compares.
	h := uint64(14695981039346656037)
	for _, f := range w.frames {
		h = (h ^ f.PC) * 1099511628211
		h = (h ^ uint64(f.Kind)<<1 ^ b2u(f.Return)) * 1099511628211
	}
	w.hash = h
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (w *Walk) walkFrames(u *unwind.Unwinder, res unwind.Resolver) {
	if w.hasRegs {
		w.frames, w.stop = u.Unwind(w.regs, w.sp, w.stack, res, w.user, w.frames[:0])
		w.endSP = 0
		if sp, ok := u.LastSP(); ok {
			w.endSP = sp
		}
		return
	}
	w.endSP = 0
	// No user registers (e.g. a sample without --call-graph dwarf): the
	// kernel's user callchain is all there is.
	w.frames = w.frames[:0]
	for i, pc := range w.user {
		w.frames = append(w.frames, unwind.Frame{PC: pc, Kind: unwind.FrameCallchain, Return: i > 0})
	}
	w.stop = unwind.StopNoRegs
}

// prewalker prepares walks in record order for a set of walkers. Not safe
// for concurrent use (its walkers are, each on one goroutine).
type prewalker struct {
	s      *Session
	own    *Maps // its own copy (Maps.Find caches the last hit)
	tramps trampTable
	entry  map[*perfdata.Event]bool

	mu      sync.Mutex // guards log, base and every walker's applied
	log     []mapChange
	base    int // the version of log[0]
	walkers []*walker
	// trimAt, settleAt: logTrim and logSettle (smaller in tests).
	trimAt, settleAt int
}

// mapChange is one change of the code mappings, as Observe saw it.
type mapChange struct {
	kind      uint8
	pid, ppid uint32
	m         Mapping
}

const (
	changeMmap = iota
	changeExec
	changeFork
)

// Log lengths: trimmed (up to the slowest walker) past logTrim entries;
// past logSettle a walker that lags that far is caught up at a barrier.
const (
	logTrim   = 4096
	logSettle = 1 << 16
)

// walker walks prepared stacks on its own goroutine.
type walker struct {
	s       *Session
	pre     *prewalker
	maps    *Maps
	applied int // the log version maps reflects
	unw     *unwind.Unwinder
	rows    cfi.RowCache
	res     walkResolver
}

// newPrewalker returns a prewalker and n walkers for the session's
// recording. The session must not Unwind while they are used (it keeps
// interning their walks with Intern, and following the records with
// Observe).
func (s *Session) newPrewalker(n int) (*prewalker, []*walker) {
	p := &prewalker{s: s, own: newMaps(), tramps: trampTable{}, entry: map[*perfdata.Event]bool{},
		trimAt: logTrim, settleAt: logSettle}
	ws := make([]*walker, n)
	for i := range ws {
		w := &walker{s: s, pre: p, maps: newMaps(), unw: unwind.New(s.arch)}
		w.unw.Rows = &w.rows
		w.res.wk = w
		ws[i] = w
	}
	p.walkers = ws
	return p, ws
}

// Changes reports whether rec changes what walkers see, so that the
// caller must Observe it. Anonymous data mappings (most MMAP records of a
// recording made with -d) do not, unless they land on a mapping the
// walkers know: to an unwinder an anonymous mapping and no mapping are
// the same (no code).
func (p *prewalker) Changes(rec perfdata.Record) bool {
	switch r := rec.(type) {
	case *perfdata.Mmap:
		if r.Pid == perfdata.KernelPid {
			return false
		}
		m := Mapping{File: r.Filename}
		if !m.Anon() {
			return true
		}
		return p.own.overlaps(r.Pid, r.Addr, r.Addr+r.Len)
	case *perfdata.Comm:
		return r.Exec
	case *perfdata.Fork:
		return r.Pid != r.Ppid
	}
	return false
}

// Observe applies a record for which Changes is true: walks prepared from
// now on see it. It reports whether the log grew so long behind a walker
// that the caller should wait until no walk runs and call Settle.
func (p *prewalker) Observe(rec perfdata.Record) (settle bool) {
	var c mapChange
	switch r := rec.(type) {
	case *perfdata.Mmap:
		if r.Pid == perfdata.KernelPid {
			return false
		}
		c = mapChange{kind: changeMmap, pid: r.Pid, m: *mappingOf(r)}
	case *perfdata.Comm:
		if !r.Exec {
			return false
		}
		c = mapChange{kind: changeExec, pid: r.Pid}
	case *perfdata.Fork:
		if r.Pid == r.Ppid {
			return false
		}
		c = mapChange{kind: changeFork, pid: r.Pid, ppid: r.Ppid}
	default:
		return false
	}
	c.apply(p.own)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, c)
	if len(p.log) < p.trimAt {
		return false
	}
	low := p.base + len(p.log)
	for _, w := range p.walkers {
		low = min(low, w.applied)
	}
	if cut := low - p.base; cut >= len(p.log)/2 {
		p.log = append([]mapChange(nil), p.log[cut:]...)
		p.base = low
	}
	return len(p.log) >= p.settleAt
}

// Settle catches every walker up with the log and empties it. Call it only
// while no walk runs.
func (p *prewalker) Settle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.walkers {
		w.catchUpLocked(p.base + len(p.log))
	}
	p.base += len(p.log)
	p.log = nil
}

func (c *mapChange) apply(m *Maps) {
	switch c.kind {
	case changeMmap:
		nm := c.m // each replica its own: Maps may keep and change it
		m.Add(c.pid, &nm)
	case changeExec:
		m.exec(c.pid)
	case changeFork:
		m.fork(c.ppid, c.pid)
	}
}

// catchUp applies the logged changes up to version v to the replica.
func (wk *walker) catchUp(v int) {
	if wk.applied >= v {
		return
	}
	wk.pre.mu.Lock()
	wk.catchUpLocked(v)
	wk.pre.mu.Unlock()
}

func (wk *walker) catchUpLocked(v int) {
	p := wk.pre
	for ; wk.applied < v; wk.applied++ {
		p.log[wk.applied-p.base].apply(wk.maps)
	}
}

// Prepare fills w for smp, in record order, copying what the reader
// reuses: the decoded callchain always, the stack bytes when copyStack is
// set (perfdata.Reader.Stable says when they must be).
func (p *prewalker) Prepare(smp *perfdata.Sample, w *Walk, copyStack bool) {
	w.prepare(smp, true, p.s.arch)
	w.version = p.base + len(p.log) // p.mu guards them against walkers, which only read
	if copyStack && w.stack != nil {
		w.stackBuf = append(w.stackBuf[:0], w.stack...)
		w.stack = w.stackBuf
	}
	w.entry = w.hasRegs && p.isEntryProbe(smp.Event)
	if w.entry {
		p.tramps.noteEntry(p.own, w.Pid, w.Tid, w.sp, w.stack)
	}
	w.tramps = append(w.tramps[:0], p.tramps[w.Tid]...)
}

func (p *prewalker) isEntryProbe(ev *perfdata.Event) bool {
	if ev == nil {
		return false
	}
	v, ok := p.entry[ev]
	if !ok {
		v = isEntryProbe(ev)
		p.entry[ev] = v
	}
	return v
}

// Walk walks a prepared stack.
func (wk *walker) Walk(w *Walk) {
	wk.catchUp(w.version)
	wk.res.pid, wk.res.w = w.Pid, w
	w.walk(wk.unw, &wk.res)
}

// walkResolver is resolver over a walker's replica and a walk's noted
// return addresses.
type walkResolver struct {
	wk  *walker
	pid uint32
	w   *Walk
}

func (r *walkResolver) Lookup(pc uint64) (*cfi.Table, uint64, bool) {
	return r.wk.s.lookup(r.wk.maps, r.pid, pc)
}

func (r *walkResolver) ResolveTrampoline(pc, sp uint64) (uint64, bool) {
	return resolveTrampoline(r.w.tramps, sp)
}

// overlaps reports whether any mapping of pid meets [start, end).
func (m *Maps) overlaps(pid uint32, start, end uint64) bool {
	p := m.procs[pid]
	if p == nil {
		return false
	}
	for _, x := range p.maps {
		if x.Start < end && start < x.End {
			return true
		}
	}
	return false
}

// Stack returns the stack bytes the walk reads (the sample's, or its own
// copy).
func (w *Walk) Stack() []byte { return w.stack }
