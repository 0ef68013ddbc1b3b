package symbolize

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize/binfile"
	"github.com/faultline/faultline/symbolize/internal/cfi"
	"github.com/faultline/faultline/symbolize/unwind"
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
	// InputBytes, when positive, is the size of the recording: the DWARF
	// and symbol tables loaded are bounded in proportion
	// (binfile.DWARFForInput, SymbolsForInput), so a small or crafted file
	// cannot make symbolizing cost more than reading it.
	InputBytes int64
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
	// their copied stack needed.
	Need StackNeed
}

// Session is the unwinding front end of one recording: it follows the
// processes (Procs), walks the stacks of their samples with the
// recording's architecture's unwinder, and interns what it walked in the
// location table (Table), which names it. Procs' and Table's methods are
// the Session's. Not safe for concurrent use.
type Session struct {
	*Procs
	*Table

	arch unwind.Arch    // the recording's, from meta
	meta *perfdata.Meta // for CheckArch: a pipe delivers ARCH after NewSession
	unw  *unwind.Unwinder
	rows cfi.RowCache // the serial Unwind's: no lock, no row copies
	res  resolver
	walk Walk           // the serial Unwind's walk
	top  []unwind.Frame // UnwindTop's frames
	ids  []LocID

	tramps     trampTable
	entryProbe map[*perfdata.Event]bool

	stats  UnwindStats
	byStop [256]uint64 // stats.ByStop by Stop, made into the map by Stats
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
	if cfg.InputBytes > 0 && loc.DWARF == nil {
		loc.DWARF = &binfile.DWARFBudget{Total: binfile.DWARFForInput(cfg.InputBytes), Symbols: binfile.SymbolsForInput(cfg.InputBytes), Input: cfg.InputBytes}
	}
	s := &Session{
		Procs:      newProcs(),
		Table:      newTable(loc),
		arch:       arch,
		meta:       meta,
		unw:        unwind.New(arch),
		tramps:     trampTable{},
		entryProbe: map[*perfdata.Event]bool{},
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
	m := maps.find(pid, pc)
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
	if m := maps.find(pid, ret); m != nil && m.File == "[uprobes]" {
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
		pc, m := s.canonical(f.PC, s.Maps.find(pid, f.PC))
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
	pc, m := s.canonical(ret, s.Maps.find(pid, ret))
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
		pc, m := s.canonical(f.PC, s.Maps.find(pid, f.PC))
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

// Locate interns the location of the instruction at pc in process pid, for
// callers that have single instruction addresses rather than stacks (the
// access log of correlate). It is not a return address: Lines names pc itself.
func (s *Session) Locate(pid uint32, pc uint64) LocID {
	pc, m := s.canonical(pc, s.Maps.find(pid, pc))
	return s.intern(Loc{PC: pc, Map: m})
}
