package symbolize

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"slices"
	"sort"
	"sync"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize/binfile"
	"github.com/faultline/faultline/symbolize/cfi"
	"github.com/faultline/faultline/symbolize/unwind"
	"golang.org/x/sys/unix"
)

// Config says where to find binaries and debug info.
type Config struct {
	// Symfs is perf's --symfs: a directory holding the recording machine's
	// files. With Symfs set, only it (and an explicit BuildIDDir) is
	// searched unless SymfsFallback is set.
	Symfs string
	// SymfsFallback also searches this machine's files after Symfs, as
	// perf does: the recorded paths, /usr/lib/debug, ~/.debug and the
	// debuginfod cache.
	SymfsFallback bool
	// BuildIDDir is perf's --buildid-dir (default ~/.debug).
	BuildIDDir string
	// Kallsyms is a /proc/kallsyms copy to name kernel frames; "" names them [kernel].
	Kallsyms string
	// Getenv reads the environment (nil: os.Getenv).
	Getenv func(string) string
	// AllowMismatch names and unwinds frames with a file that is not the
	// binary that ran when nothing else is found (--allow-mismatch).
	AllowMismatch bool
	// NoDebuginfod never asks debuginfod servers, even with DEBUGINFOD_URLS set.
	NoDebuginfod bool
	// DebuginfodProgress, if set, hears of downloads from debuginfod
	// servers (binfile.Debuginfod.Progress); it may be called from
	// several goroutines.
	DebuginfodProgress func(url string, done, total int64)
	// Locator overrides the file search entirely (tests); nil builds one from the fields above.
	Locator *binfile.Locator
}

// StackID names an interned stack: a sequence of locations, leaf first.
// 0 is the empty stack.
type StackID uint32

// LocID names an interned location: a PC in a mapping.
type LocID uint32

// Loc is one interned location.
type Loc struct {
	PC     uint64
	Map    *Mapping // nil: in no known mapping
	Return bool     // a return address: its call is at PC-1
	Kernel bool
	Kind   unwind.FrameKind
}

type locKey struct {
	pc     uint64
	m      *Mapping
	ret    bool
	kernel bool
}

// mapInfo is what a Mapping's binary gives the unwinder and the symbolizer,
// loaded on first use.
type mapInfo struct {
	bin   *binfile.Binary
	table *cfi.Table
	bias  uint64
	err   error
	// noCode: the unwinder finds no code here (anonymous memory, stack,
	// heap, the uprobes trampoline page).
	noCode bool
	// refused: the file found is not the binary that ran.
	refused bool
}

// UnwindStats counts how walks ended.
type UnwindStats struct {
	Samples  uint64
	Complete uint64            // reached a root frame
	ByStop   map[string]uint64 // walks per stop reason
	Frames   uint64
	// Refused counts frames in mappings whose file is not the binary that
	// ran (a *binfile.MismatchError): left unnamed, not unwound by its CFI.
	Refused uint64
	// Need says how deep a copy the walks that stopped at the end of
	// their copied stack needed (stackneed.go).
	Need StackNeed
}

// Session follows the processes of one recording (maps, comms) and unwinds
// and names the stacks of its samples. Not safe for concurrent use.
type Session struct {
	Maps *Maps

	cache    *binfile.Cache
	kallsyms *binfile.Kallsyms
	comms    map[uint32]string
	noComm   map[uint32]string // Comm's names for pids without a COMM record
	buildIDs map[string]string // recorded path → build id (hex) from the BUILD_ID feature
	tables   map[*binfile.Binary]*cfi.Table
	tableErr map[*binfile.Binary]error

	arch unwind.Arch    // the recording's, from meta
	meta *perfdata.Meta // for CheckArch: a pipe delivers ARCH after NewSession
	unw  *unwind.Unwinder
	rows cfi.RowCache // the serial Unwind's: no lock, no row copies
	res  resolver
	walk Walk           // the serial Unwind's walk
	top  []unwind.Frame // UnwindTop's frames
	ids  []LocID

	locIndex   map[locKey]LocID
	locs       []Loc
	stackIndex map[uint64][]StackID
	stackData  []LocID
	stackOff   []uint32 // stack i is stackData[stackOff[i]:stackOff[i+1]]
	seed       maphash.Seed

	tramps     trampTable
	entryProbe map[*perfdata.Event]bool

	canon map[mapIdentity]*Mapping
	lines map[lineKey][]binfile.Frame
	// infoMu guards opening binaries and tables (cache, tables, tableErr,
	// warnings): parallel walkers (walk.go) load them too.
	infoMu   sync.Mutex
	warnings []error
	warned   map[string]bool
	stats    UnwindStats
	byStop   [256]uint64 // stats.ByStop by Stop, made into the map by Stats
	// tops and need: how deep the copies of walks that stopped at the end
	// of their copy had to be (stackneed.go).
	tops map[uint64]*threadTop
	need StackNeed

	// seen caches Intern by process and walked frames: while the maps do
	// not change (Maps.gen) the same frames in the same process intern to
	// the same stack, found without a lookup per frame.
	seen map[seenKey]*seenStack
}

type seenKey struct {
	pid  uint32
	hash uint64
}

type seenStack struct {
	gen     uint64
	id      StackID
	frames  []unwind.Frame
	refused uint64 // frames in refused mappings
}

type lineKey struct {
	id    LocID
	exact bool // symbolize PC itself (perf script's convention) rather than PC-1
}

// NewSession starts a session. meta supplies build IDs (the BUILD_ID feature).
//
// The recording's architecture comes from meta (perf's ARCH feature): one
// whose stacks this package cannot unwind is refused with an *ArchError.
func NewSession(cfg Config, meta *perfdata.Meta) (*Session, error) {
	var machine string
	if meta != nil {
		machine = meta.Arch
	}
	arch, err := recordingArch(machine)
	if err != nil {
		return nil, err
	}
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var loc binfile.Locator
	if cfg.Locator != nil {
		loc = *cfg.Locator
	} else {
		loc = binfile.NewLocator(cfg.Symfs, getenv)
		loc.HostFallback = cfg.SymfsFallback
		if cfg.Symfs != "" && !cfg.SymfsFallback {
			// The default caches are this machine's, not the recording's.
			loc.BuildIDDir, loc.DebuginfodCache, loc.Debuginfod = "", "", nil
		}
		if cfg.BuildIDDir != "" {
			loc.BuildIDDir = cfg.BuildIDDir
		}
		if cfg.NoDebuginfod {
			loc.Debuginfod = nil
		} else if d, ok := loc.Debuginfod.(*binfile.Debuginfod); ok && cfg.DebuginfodProgress != nil {
			d.Progress = cfg.DebuginfodProgress
		}
		loc.AllowMismatch = cfg.AllowMismatch
	}
	s := &Session{
		Maps:       NewMaps(),
		cache:      binfile.NewCache(loc),
		comms:      map[uint32]string{},
		noComm:     map[uint32]string{},
		buildIDs:   map[string]string{},
		tables:     map[*binfile.Binary]*cfi.Table{},
		tableErr:   map[*binfile.Binary]error{},
		arch:       arch,
		meta:       meta,
		unw:        unwind.New(arch),
		locIndex:   map[locKey]LocID{},
		locs:       []Loc{{}}, // LocID 0 is unused
		stackIndex: map[uint64][]StackID{},
		stackOff:   []uint32{0, 0}, // StackID 0 is the empty stack
		seed:       maphash.MakeSeed(),
		lines:      map[lineKey][]binfile.Frame{},
		canon:      map[mapIdentity]*Mapping{},
		tramps:     trampTable{},
		entryProbe: map[*perfdata.Event]bool{},
		warned:     map[string]bool{},
		stats:      UnwindStats{ByStop: map[string]uint64{}},
		seen:       map[seenKey]*seenStack{},
		tops:       map[uint64]*threadTop{},
	}
	s.res.s = s
	s.unw.Rows = &s.rows
	if meta != nil {
		s.AddBuildIDs(meta.BuildIDs)
	}
	if cfg.Kallsyms != "" {
		f, err := os.Open(cfg.Kallsyms)
		if err != nil {
			return nil, fmt.Errorf("kallsyms: %w", err)
		}
		ks, err := binfile.ParseKallsyms(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("kallsyms %s: %w", cfg.Kallsyms, err)
		}
		s.kallsyms = ks
	}
	return s, nil
}

// AddBuildIDs records build IDs by path (the BUILD_ID feature, or pipe
// mode's HEADER_BUILD_ID records as they arrive). Not while Walkers walk.
func (s *Session) AddBuildIDs(ids []perfdata.BuildID) {
	for _, b := range ids {
		if len(b.ID) > 0 && b.Filename != "" {
			// Only what is new: walkers may be reading the map.
			if id := hex.EncodeToString(b.ID); s.buildIDs[b.Filename] != id {
				s.buildIDs[b.Filename] = id
			}
		}
	}
}

// Settle waits until the binaries opened so far are read in full: their
// background work (symbol tables, debug sections; see binfile). Nothing
// needs it for results; a measurement of what follows (allocations, time)
// does.
func (s *Session) Settle() { s.cache.Settle() }

// Close releases the opened binaries.
func (s *Session) Close() error { return s.cache.Close() }

// Warnings returns what could not be found or used, each said once: the
// binaries' own warnings (a *binfile.NoDebugInfoError for each binary
// without debug info, ...), binaries not found, unusable unwind tables.
func (s *Session) Warnings() []error { return s.warnings }

func (s *Session) warn(key string, err error) {
	if !s.warned[key] {
		s.warned[key] = true
		s.warnings = append(s.warnings, err)
	}
}

// Stats returns the unwinding counts so far.
func (s *Session) Stats() UnwindStats {
	st := s.stats
	st.Need = s.need
	st.ByStop = map[string]uint64{}
	for i, n := range s.byStop {
		if n > 0 {
			st.ByStop[unwind.Stop(i).String()] = n
		}
	}
	return st
}

// Comm returns the command name of pid as of the current record.
func (s *Session) Comm(pid uint32) string {
	if c, ok := s.comms[pid]; ok {
		return c
	}
	// Named like perf does; kept, as the profile builder asks per sample.
	c, ok := s.noComm[pid]
	if !ok {
		c = ":" + fmt.Sprint(pid)
		s.noComm[pid] = c
	}
	return c
}

// Observe updates process state from a non-sample record. Call it for every
// record, in time order.
func (s *Session) Observe(rec perfdata.Record) {
	switch r := rec.(type) {
	case *perfdata.Mmap:
		if r.Pid == perfdata.KernelPid {
			return
		}
		s.Maps.Add(r.Pid, mappingOf(r))
	case *perfdata.Comm:
		if r.Exec {
			s.Maps.Exec(r.Pid)
		}
		if r.Pid == r.Tid || s.comms[r.Pid] == "" {
			s.comms[r.Pid] = r.Comm
		}
	case *perfdata.Fork:
		if r.Pid != r.Ppid {
			s.Maps.Fork(r.Ppid, r.Pid)
			if c, ok := s.comms[r.Ppid]; ok {
				s.comms[r.Pid] = c
			}
		}
	}
}

// resolver implements unwind.Resolver over one process's maps, and
// unwind.TrampolineResolver over the return addresses seen at uprobe entries.
type resolver struct {
	s        *Session
	pid, tid uint32
}

func (r *resolver) Lookup(pc uint64) (*cfi.Table, uint64, bool) {
	return r.s.lookup(r.s.Maps, r.pid, pc)
}

// lookup is unwind.Resolver's Lookup over maps.
func (s *Session) lookup(maps *Maps, pid uint32, pc uint64) (*cfi.Table, uint64, bool) {
	m := maps.Find(pid, pc)
	if m == nil {
		return nil, 0, false
	}
	mi := s.mapInfo(m)
	if mi.noCode {
		return nil, 0, false
	}
	if mi.bin == nil {
		return nil, 0, true
	}
	return mi.table, mi.bias, true
}

// trampEntry is a return address a uretprobe replaced with the kernel's
// [uprobes] trampoline: at the probed function's entry the word at SP was
// the real return address, and the caller's SP will be entry SP + 8.
type trampEntry struct{ callerSP, ret uint64 }

// ResolveTrampoline implements unwind.TrampolineResolver: a frame whose
// return address is the trampoline returns to what the entry probe saw.
func (r *resolver) ResolveTrampoline(pc, sp uint64) (uint64, bool) {
	return resolveTrampoline(r.s.tramps[r.tid], sp)
}

func resolveTrampoline(es []trampEntry, sp uint64) (uint64, bool) {
	for _, e := range es {
		if e.callerSP == sp {
			return e.ret, true
		}
	}
	return 0, false
}

// trampTable holds each thread's return addresses seen at uprobe entries.
type trampTable map[uint32][]trampEntry

// noteEntry remembers the return address on top of the stack at a uprobe
// entry. Per thread the entries form a stack ordered by SP: a new entry
// drops those at or below it, whose frames have returned.
func (tt trampTable) noteEntry(maps *Maps, pid, tid uint32, sp uint64, stack []byte) {
	if len(stack) < 8 {
		return
	}
	ret := binary.LittleEndian.Uint64(stack)
	k := sp + 8
	if m := maps.Find(pid, ret); m != nil && m.File == "[uprobes]" {
		// A probed function tail-called this one (realloc(NULL, n) jumps
		// into malloc): the slot already holds the trampoline, and the
		// entry noted for the outer call has the real return address.
		return
	}
	es := tt[tid]
	for len(es) > 0 && es[len(es)-1].callerSP <= k {
		es = es[:len(es)-1]
	}
	if len(es) == 8 { // deeper than any allocator nesting: forget the oldest
		copy(es, es[1:])
		es = es[:7]
	}
	tt[tid] = append(es, trampEntry{k, ret})
}

// isEntryProbe reports whether ev is a uprobe on a function's entry (its raw
// data has __probe_ip but not __probe_ret_ip); cached per event.
func (s *Session) isEntryProbe(ev *perfdata.Event) bool {
	if ev == nil {
		return false
	}
	if v, ok := s.entryProbe[ev]; ok {
		return v
	}
	v := isEntryProbe(ev)
	s.entryProbe[ev] = v
	return v
}

func isEntryProbe(ev *perfdata.Event) bool {
	return ev.Format != nil && ev.Format.Field("__probe_ip") != nil && ev.Format.Field("__probe_ret_ip") == nil
}

func (s *Session) key(m *Mapping) binfile.Key {
	k := binfile.Key{Path: m.File, Ino: m.Ino, Gen: m.Gen}
	if m.Ino != 0 {
		k.Dev = unix.Mkdev(m.Maj, m.Min)
		k.MapEnd = m.Pgoff + (m.End - m.Start)
	}
	if len(m.BuildID) > 0 {
		k.BuildID = hex.EncodeToString(m.BuildID)
	} else if id, ok := s.buildIDs[m.File]; ok {
		k.BuildID = id
	}
	return k
}

// mapInfo opens m's binary and CFI on first use. A Mapping belongs to one
// goroutine (the session's, or one walker's replica); the shared state
// behind it is locked, except the binfile cache, which opens each binary
// once however many goroutines ask, and different ones in parallel.
func (s *Session) mapInfo(m *Mapping) *mapInfo {
	if mi := m.info; mi != nil {
		return mi
	}
	mi := &mapInfo{noCode: m.Anon() || m.File == "[stack]" || m.File == "[heap]" || m.File == "[uprobes]"}
	m.info = mi
	if !binfile.IsFileMapping(m.File) && m.File != "[vdso]" {
		mi.err = binfile.ErrNotFile
		return mi
	}
	b, err := s.cache.Open(s.key(m))
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	if err != nil {
		mi.err = err
		var me *binfile.MismatchError
		mi.refused = errors.As(err, &me)
		if !errors.Is(err, binfile.ErrNotFile) {
			s.warn("open "+m.File, err)
		}
		return mi
	}
	for _, w := range b.Warnings {
		s.warn(w.Error(), w) // binfile's warnings name the file already
	}
	mi.bin = b
	if t, ok := s.tables[b]; ok {
		mi.table = t
	} else if _, failed := s.tableErr[b]; !failed {
		t, err := cfi.Load(b.ELF(), b.DebugELF())
		if err != nil {
			s.tableErr[b] = err
			s.warn("cfi "+m.File, fmt.Errorf("%s: no usable unwind info (%w); its frames are walked by frame pointers", m.File, err))
		} else {
			s.tables[b] = t
			mi.table = t
		}
	}
	if f := b.ELF(); f != nil {
		if bias, ok := unwind.LoadBias(f, m.Start, m.Pgoff); ok {
			mi.bias = bias
		}
	}
	return mi
}

// mappingOf is the Mapping an MMAP/MMAP2 record describes.
func mappingOf(r *perfdata.Mmap) *Mapping {
	m := &Mapping{Start: r.Addr, End: r.Addr + r.Len, Pgoff: r.Pgoff, File: r.Filename,
		Prot: r.Prot, Ino: r.Ino, Gen: r.InoGeneration, Maj: r.Maj, Min: r.Min}
	m.Exec = r.Executable()
	if len(r.BuildID) > 0 {
		m.BuildID = append([]byte(nil), r.BuildID...)
	}
	return m
}

// Unwind walks a sample's user stack (and takes its kernel frames from the
// callchain when kernel is set) and returns the interned stack.
func (s *Session) Unwind(smp *perfdata.Sample, kernel bool) (StackID, unwind.Stop) {
	w := &s.walk
	w.prepare(smp, false, s.arch)
	w.entry = false // noted here, before the walk
	if w.hasRegs && s.isEntryProbe(smp.Event) {
		s.tramps.noteEntry(s.Maps, w.Pid, w.Tid, w.sp, w.stack)
	}
	s.res.pid, s.res.tid = w.Pid, w.Tid
	w.walk(s.unw, &s.res)
	return s.Intern(w, kernel), w.stop
}

// Intern interns a walked stack (and its kernel frames from the callchain
// when kernel is set) and counts the walk. Call it in record order: IDs
// are handed out in the order stacks are first seen.
func (s *Session) Intern(w *Walk, kernel bool) StackID {
	pid := w.Pid
	if w.entry {
		// The session's own table, as the serial Unwind keeps it: UnwindTop
		// reads it on this goroutine.
		s.tramps.noteEntry(s.Maps, pid, w.Tid, w.sp, w.stack)
	}
	s.stats.Samples++
	s.stats.Frames += uint64(len(w.frames))
	if w.stop.Complete() {
		s.stats.Complete++
	}
	s.byStop[w.stop]++
	s.noteDepth(w)
	var e *seenStack
	if !kernel {
		k := seenKey{pid, w.hash}
		if e = s.seen[k]; e == nil {
			e = &seenStack{}
			s.seen[k] = e
		} else if e.gen == s.Maps.gen && slices.Equal(e.frames, w.frames) {
			s.stats.Refused += e.refused
			return e.id
		}
	}
	var refused uint64
	s.ids = s.ids[:0]
	if kernel {
		ctx := uint64(0)
		for _, pc := range w.callchain {
			if pc >= perfdata.ContextMax {
				ctx = pc
				if pc == perfdata.ContextUser {
					break
				}
				continue
			}
			if ctx == perfdata.ContextKernel {
				s.ids = append(s.ids, s.intern(Loc{PC: pc, Kernel: true, Return: len(s.ids) > 0}))
			}
		}
	}
	for _, f := range w.frames {
		pc, m := s.canonical(f.PC, s.Maps.Find(pid, f.PC))
		if m != nil && m.Exec && s.mapInfo(m).refused {
			refused++
		}
		s.ids = append(s.ids, s.intern(Loc{PC: pc, Map: m, Return: f.Return, Kind: f.Kind}))
	}
	s.stats.Refused += refused
	id := s.internStack(s.ids)
	if e != nil {
		e.gen, e.id, e.frames, e.refused = s.Maps.gen, id, append(e.frames[:0], w.frames...), refused
	}
	return id
}

// CallerStack interns the one-frame stack of a return address ret in pid:
// a caller frame, named by its call instruction (ret-1) with its inline
// chain. It is the exact leaf of an allocation recorded without a stack
// (the return probe's __probe_ret_ip); equal return addresses in the same
// binary give the same StackID, in any process.
func (s *Session) CallerStack(pid uint32, ret uint64) StackID {
	pc, m := s.canonical(ret, s.Maps.Find(pid, ret))
	if m != nil && m.Exec && s.mapInfo(m).refused {
		s.stats.Refused++
	}
	id := s.intern(Loc{PC: pc, Map: m, Return: true, Kind: unwind.FrameSample})
	var one [1]LocID
	one[0] = id
	return s.internStack(one[:])
}

// perf's x86-64 sample_regs_user bits of BP, SP and IP (enum perf_event_x86_regs,
// arch/x86/include/uapi/asm/perf_regs.h).
const (
	x86PerfRegBP = 6
	x86PerfRegSP = 7
	x86PerfRegIP = 8
)

// UnwindTop walks the top of a stack known only by a few words: an entry
// probe's fetch arguments (faultline record's sp=%sp bp=%bp s0=+0(%sp) …)
// give the probed PC, SP, BP (hasBP) and the words from SP up, in
// stack. It returns the frames' locations, leaf first, as far as the walk
// got before the words ran out; the slice is reused by the next call of
// UnwindTop or Unwind. Nothing is interned as a stack and the unwind
// statistics do not count it: it is a leaf finder, not a sample's stack.
// The fetch arguments are x86-64's: on any other architecture it returns
// no frames.
func (s *Session) UnwindTop(pid, tid uint32, ip, sp, bp uint64, hasBP bool, stack []byte) []LocID {
	if s.arch != unwind.ArchX86_64 {
		return s.ids[:0]
	}
	var vals [3]uint64
	mask := uint64(1)<<x86PerfRegSP | 1<<x86PerfRegIP
	n := 0
	if hasBP {
		mask |= 1 << x86PerfRegBP
		vals[n] = bp
		n++
	}
	vals[n], vals[n+1] = sp, ip
	regs := unwind.RegsFromPerf(unwind.ArchX86_64, mask, vals[:n+2])
	s.res.pid, s.res.tid = pid, tid
	s.top, _ = s.unw.Unwind(regs, sp, stack, &s.res, nil, s.top[:0])
	s.ids = s.ids[:0]
	for _, f := range s.top {
		pc, m := s.canonical(f.PC, s.Maps.Find(pid, f.PC))
		s.ids = append(s.ids, s.intern(Loc{PC: pc, Map: m, Return: f.Return, Kind: f.Kind}))
	}
	return s.ids
}

// CallerStackOf interns the one-frame stack of a caller location (a frame
// of an unwound stack with Return set): the same StackID CallerStack gives
// its return address.
func (s *Session) CallerStackOf(id LocID) StackID {
	l := s.locs[id]
	var one [1]LocID
	one[0] = s.intern(Loc{PC: l.PC, Map: l.Map, Return: true, Kind: unwind.FrameSample})
	return s.internStack(one[:])
}

// mapIdentity says when two mappings, in different processes or at
// different addresses (ASLR), hold the same bytes of the same file.
type mapIdentity struct {
	file       string
	buildID    string
	ino, dev   uint64
	pgoff, len uint64
}

// canonical moves pc in m to the session's shared mapping of the same file
// range: the first mapping seen of it. Every process that runs a program
// (each cc1 of a build) then shares its locations, stacks and cached
// lines, so they grow with the code run, not with the number of processes
// in the recording. The address relative to the file (Loc.RelAddr), which
// perf script prints and symbolization uses, does not change. Anonymous
// and special mappings other than [vdso] stay per process.
func (s *Session) canonical(pc uint64, m *Mapping) (uint64, *Mapping) {
	if m == nil {
		return pc, nil
	}
	c := m.canon
	if c == nil {
		if m.Anon() || (m.Special() && m.File != "[vdso]") {
			c = m
		} else {
			k := mapIdentity{file: m.File, buildID: string(m.BuildID), ino: m.Ino, dev: uint64(m.Maj)<<32 | uint64(m.Min), pgoff: m.Pgoff, len: m.End - m.Start}
			if c = s.canon[k]; c == nil {
				c = m
				s.canon[k] = m
			}
		}
		m.canon = c
	}
	return pc - m.Start + c.Start, c
}

func (s *Session) intern(l Loc) LocID {
	k := locKey{pc: l.PC, m: l.Map, ret: l.Return, kernel: l.Kernel}
	if id, ok := s.locIndex[k]; ok {
		return id
	}
	id := LocID(len(s.locs))
	s.locs = append(s.locs, l)
	s.locIndex[k] = id
	return id
}

func (s *Session) internStack(ids []LocID) StackID {
	if len(ids) == 0 {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(s.seed)
	var b [4]byte
	for _, id := range ids {
		b[0], b[1], b[2], b[3] = byte(id), byte(id>>8), byte(id>>16), byte(id>>24)
		h.Write(b[:])
	}
	sum := h.Sum64()
	for _, c := range s.stackIndex[sum] {
		if equalIDs(s.Stack(c), ids) {
			return c
		}
	}
	id := StackID(len(s.stackOff) - 1)
	s.stackData = append(s.stackData, ids...)
	s.stackOff = append(s.stackOff, uint32(len(s.stackData)))
	s.stackIndex[sum] = append(s.stackIndex[sum], id)
	return id
}

func equalIDs(a, b []LocID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Stack returns the locations of an interned stack, leaf first. The slice
// belongs to the session.
func (s *Session) Stack(id StackID) []LocID {
	if int(id)+1 >= len(s.stackOff) {
		return nil
	}
	return s.stackData[s.stackOff[id]:s.stackOff[id+1]]
}

// NumStacks returns how many distinct stacks were interned.
func (s *Session) NumStacks() int { return len(s.stackOff) - 2 }

// Loc returns an interned location.
func (s *Session) Loc(id LocID) *Loc { return &s.locs[id] }

// Binary returns the opened binary of a mapping, or nil.
func (s *Session) Binary(m *Mapping) *binfile.Binary {
	if m == nil {
		return nil
	}
	return s.mapInfo(m).bin
}

// Lines names a location: its inline chain, innermost first (at least one
// frame; binfile.Unknown when nothing names it). exact selects perf
// script's convention of naming a return address itself; otherwise a
// return address is named by its call instruction (PC-1), as pprof and
// addr2line want. Cached per location.
func (s *Session) Lines(id LocID, exact bool) []binfile.Frame {
	k := lineKey{id, exact}
	if f, ok := s.lines[k]; ok {
		return f
	}
	l := &s.locs[id]
	var out []binfile.Frame
	if l.Kernel {
		if s.kallsyms != nil {
			out = s.kallsyms.Symbolize(l.symPC(exact), nil)
		} else {
			out = []binfile.Frame{{Func: "[kernel]"}}
		}
	} else if l.Map != nil {
		out = l.symbolize(s.Binary(l.Map), exact)
	}
	if len(out) == 0 {
		out = []binfile.Frame{{Func: binfile.Unknown}}
	}
	s.lines[k] = out
	return out
}

// symPC is the address that names l: a return address is named by its
// call instruction (PC-1) unless exact.
func (l *Loc) symPC(exact bool) uint64 {
	if l.Return && !exact {
		return l.PC - 1
	}
	return l.PC
}

// symbolize names a location in a file mapping from its binary b (nil:
// none found). Safe for concurrent use with other locations.
func (l *Loc) symbolize(b *binfile.Binary, exact bool) []binfile.Frame {
	if b == nil {
		return nil
	}
	if vaddr, ok := b.MappedVaddr(l.symPC(exact), l.Map.Start, l.Map.Pgoff); ok {
		return b.Symbolize(vaddr, nil)
	}
	return nil
}

// Prefetch names the locations of every stack interned so far on n
// goroutines, a binary per goroutine at a time, so that Lines finds them
// cached (the profile names all of them at its end, one by one). The
// names are those Lines would give.
func (s *Session) Prefetch(exact bool, n int) {
	byBin := map[*binfile.Binary][]LocID{}
	var bins []*binfile.Binary
	seen := make([]bool, len(s.locs))
	for _, id := range s.stackData {
		l := &s.locs[id]
		if seen[id] || l.Kernel || l.Map == nil {
			continue
		}
		seen[id] = true
		if _, ok := s.lines[lineKey{id, exact}]; ok {
			continue
		}
		b := s.Binary(l.Map)
		if b == nil {
			continue
		}
		if byBin[b] == nil {
			bins = append(bins, b)
		}
		byBin[b] = append(byBin[b], id)
	}
	out := make([][][]binfile.Frame, len(bins))
	next := make(chan int, len(bins))
	for i := range bins {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(n, len(bins)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ids := byBin[bins[i]]
				out[i] = make([][]binfile.Frame, len(ids))
				for j, id := range ids {
					out[i][j] = s.locs[id].symbolize(bins[i], exact)
				}
			}
		}()
	}
	wg.Wait()
	for i, b := range bins {
		for j, id := range byBin[b] {
			f := out[i][j]
			if len(f) == 0 {
				f = []binfile.Frame{{Func: binfile.Unknown}}
			}
			s.lines[lineKey{id, exact}] = f
		}
	}
}

// RelAddr is the address perf script prints for a location: the file
// offset (PC - start + pgoff) for file mappings, the PC itself otherwise.
func (l *Loc) RelAddr() uint64 {
	if l.Map == nil || l.Kernel || l.Map.Anon() {
		return l.PC
	}
	return l.PC - l.Map.Start + l.Map.Pgoff
}

// DSO names the location's mapping as perf does: the recorded path,
// "[kernel.kallsyms]" for kernel frames, "[unknown]" when unmapped.
func (l *Loc) DSO() string {
	switch {
	case l.Kernel:
		return "[kernel.kallsyms]"
	case l.Map == nil:
		return "[unknown]"
	}
	return l.Map.File
}

// Region says what an address of pid lies in now: the mapping's file or
// its special name, "" when unmapped.
func (s *Session) Region(pid uint32, addr uint64) *Mapping { return s.Maps.Find(pid, addr) }

// Pids returns the processes seen, sorted.
func (s *Session) Pids() []uint32 {
	var out []uint32
	for p := range s.Maps.procs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Locate interns the location of the instruction at pc in process pid, for
// callers that have single instruction addresses rather than stacks (the
// access log of correlate). It is not a return address: Lines names pc itself.
func (s *Session) Locate(pid uint32, pc uint64) LocID {
	pc, m := s.canonical(pc, s.Maps.Find(pid, pc))
	return s.intern(Loc{PC: pc, Map: m})
}
