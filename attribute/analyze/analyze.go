// Package analyze runs faultline's whole job over one recording: it reads
// the records in time order (perfdata), keeps every process's maps and
// unwinds each sample's stack (symbolize), feeds allocations, frees and page
// faults to the tracker (attribute) and builds the pprof profile and the
// summary (attribute/report).
package analyze

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
)

// Options configures a run.
type Options struct {
	Attr attribute.Config
	Mode report.Mode
	// Events overrides event roles by event name: "malloc", "malloc-return",
	// "calloc", ..., "free", "fault", "ignore".
	Events map[string]string
	// Progress, when set, is called now and then with the bytes read so far.
	Progress func(offset int64)
	// Done, when set, is called once the profile is built, while the
	// reader, session and tracker are still live (heap profiles).
	Done func()
	// Workers is how many goroutines unwind stacks beside the one that
	// decodes (0: GOMAXPROCS; 1: everything on the calling goroutine;
	// more: symbolize.Pipeline). The profile is the same for any number.
	Workers int
	// RawSites keeps allocations' raw leaf frames in the profile and names
	// the summary's sites by them, instead of their first frame in the
	// user's own code (report.Builder.RawSites).
	RawSites bool
	// Comms and Pids select the programs of a recording that spans several
	// (a shell pipeline, a build), as perf report's --comm and --pid do: a
	// sample counts when its process or thread has one of the names in
	// Comms at that moment (after an exec, the new program's) and its
	// process one of the ids in Pids; an empty list selects every one.
	// Other samples are ignored, and the summary says what was kept.
	Comms []string
	Pids  []uint32
	// Timeline keeps every site's resident memory over time for
	// Result.Timeline (faultline timeline).
	Timeline bool
	// Windows, when set, cuts the run into windows, a profile each
	// (window.go); the run reads its records serially.
	Windows *WindowOptions
}

// EventSummary is one event's counts.
type EventSummary struct {
	Name    string
	Role    string
	Samples uint64
	Lost    uint64
}

// Summary is what a run found, for people and for tests.
type Summary struct {
	Events    []EventSummary
	Tracker   attribute.Stats
	Classes   map[string]uint64 // unattributed faults by class
	Unwind    symbolize.UnwindStats
	TopSites  []report.SiteTotals
	Fallbacks []string // approximations the run had to make
	// Warnings are the problems that did not stop the run, in the order
	// found: the reader's (*perfdata.FormatError, ...), the symbolizer's
	// (*binfile.NoDebugInfoError, ...) and the analysis's own. The command
	// decides how to show them.
	Warnings []error
	// WarningsDropped counts the reader's warnings beyond those it keeps.
	WarningsDropped int
	LostTotal       uint64
	// LostWindows: where allocation events were lost and how many faults
	// fell in those windows (see lost.go for the rule).
	LostWindows LostWindows
	// LostBuffer sums the LOST records: events dropped from full ring
	// buffers, the same losses as the per-event counts again (perf 6.x
	// writes both), counted per buffer.
	LostBuffer uint64
	// StackJoin and AllocStacks are set for recordings with allocator
	// entries without stacks (faultline record's shape): how stack samples
	// met their calls, and allocations and faults by the profile's `stack`
	// label (sampled, inferred, leaf).
	StackJoin   *StackJoin
	AllocStacks map[string]report.StackTotal
	// TopStacks is set when the entry probes fetched the top of the stack
	// (faultline record's sp, bp, s0… fields): how the calls without a
	// stack found their exact leaf from it.
	TopStacks *TopStacks
	// Selection is set when Options.Comms or Options.Pids chose programs.
	Selection *Selection
	// FromRecord: the recording was made by faultline record (its CMDLINE
	// feature says), so advice names record's flags.
	FromRecord bool
	// NoFaultStacks: the profile is by touch (report.ByTouch) but no fault
	// event of the recording carries stacks, so no fault names the code
	// that touched the memory.
	NoFaultStacks bool
	Truncated     bool
	// Resident is the resident memory the faults made, by site.
	Resident ResidentSummary
	// DecodeError is the error that stopped decoding early (a corrupt
	// record) when the records before it made the profile; Truncated is
	// set too.
	DecodeError string
}

// ResidentSummary is the anonymous memory the recorded faults made
// resident, followed page by page through the releases.
type ResidentSummary struct {
	PeakBytes int64
	PeakTime  uint64 // ns after Start, the first sample's time
	Start     uint64
	AtPeak    []report.SiteValue
	EndBytes  int64
	// Refaults are faults on pages released before; Churn the sites that
	// took the most.
	Refaults uint64
	Churn    []report.SiteValue
	// MapCalls counts the memory-map calls recorded (entries);
	// MappedFaults the faults given to the program's own mappings.
	MapCalls, MappedFaults uint64
	// MapEvents says the recording has memory-map call events, whether
	// or not the program made any such call.
	MapEvents bool
	// KernelMaps counts the anonymous mappings that took faults which no
	// recorded call made, only the kernel's mmap records showed (the C
	// library's own map calls, raw system calls); KernelMapFaults their
	// faults, which go unattributed: no call's stack names them, and
	// their releases are not seen unless a recorded call makes them.
	KernelMaps, KernelMapFaults uint64
	// ProcessHWM is the recorded program's own peak RSS and ProcessAnon
	// its peak anonymous RSS, in bytes, as faultline record measured
	// them (0: not recorded); OwnPeakBytes is the tracked peak of that
	// process alone (of the largest address space without a pid), which
	// they compare with.
	ProcessHWM, ProcessAnon int64
	OwnPeakBytes            int64
	// Snapshots is what the page-table snapshots said (nil: the recording
	// has none).
	Snapshots *SnapshotSummary
	// Processes are each address space's own figures, largest tracked
	// peak first, when the recording has several.
	Processes []ProcessResident
}

// ProcessResident is one address space's resident memory: what the
// recording tracked (PeakBytes, EndBytes) and the kernel's own figures
// from its snapshots (HWM: peak RSS, file pages included; Anon: the
// largest anonymous RSS read; 0: none).
type ProcessResident struct {
	Pid                 uint32
	Comm                string
	PeakBytes, EndBytes int64
	HWM, Anon           int64
}

// Result is a finished run.
type Result struct {
	Profile *profile.Profile
	Summary Summary
	// Timeline is set with Options.Timeline: the profile's samples'
	// resident pages over time.
	Timeline *Timeline
}

// Timeline is every profile sample's resident pages over time
// (attribute.Resident.Timeline): Owner indexes Profile.Sample.
type Timeline struct {
	Points []attribute.TimelinePoint
	// Start is the time of the first sample; Faults counts the faults
	// that made a page resident per Tick ns from Start.
	Start, Tick uint64
	Faults      []uint64
	First, Last uint64 // the recording's first and last sample times
	// Snapshots are the page-table snapshots the recording holds, in
	// time order.
	Snapshots []SnapshotPoint
}

type run struct {
	opts  Options
	r     *perfdata.Reader
	sess  *symbolize.Session
	tr    *attribute.Tracker
	b     *report.Builder
	infos []*eventInfo
	// threads are the names COMM records gave threads (tid → name).
	threads map[uint32]string
	// warnings are the run's own (formats inferred, ...), said once each.
	warnings []error
	runCounts

	st *stacks // the stack join, leaves and callers (stacks.go)

	// walk is the current sample's stack walk when a pipeline walked it
	// (pipeline.go); nil: unwind on demand.
	walk *symbolize.Walk

	sel *Selection // nil: every sample counts

	mm *memMaps // the memory-map calls (memmap.go)
	// noAllocator: the recording probed no allocator (noalloc.go).
	noAllocator bool
	snap        snapState // the page-table snapshots (snapshot.go)
	// preload finds the programs an in-process recording ran without its
	// shim.
	preload schema.PreloadCheck

	reusedEvents

	win *windows // with Options.Windows
}

// runCounts are what a run counts beside the tracker: samples and losses
// per event, unattributed faults per class, build IDs and events seen.
type runCounts struct {
	counts     []EventSummary
	classes    map[string]uint64
	lost       lostTracker
	lostBuffer uint64
	noPointer  uint64 // posix_memalign returns without the pointer

	nBuildIDs, nEvents int // build IDs and events seen (pipe mode adds them as records)
}

// reusedEvents are the tracker's events a run fills for each sample, kept
// so that the per-sample path allocates nothing.
type reusedEvents struct {
	entry attribute.Entry
	ret   attribute.Return
	free  attribute.Free
	fault attribute.Fault
}

// Run analyzes everything r delivers. sess must be fresh.
func Run(r *perfdata.Reader, sess *symbolize.Session, opts Options) (*Result, error) {
	ru := &run{opts: opts, r: r, sess: sess, runCounts: runCounts{classes: map[string]uint64{}, nEvents: -1}, threads: map[uint32]string{},
		st: newStacks(sess), mm: newMemMaps()}
	if len(opts.Comms) > 0 || len(opts.Pids) > 0 {
		ru.sel = newSelection(opts.Comms, opts.Pids)
	}
	if opts.Windows != nil {
		ru.win = &windows{opts: opts.Windows, exited: map[uint32]bool{}}
	}
	if err := ru.records(); err != nil {
		return nil, err
	}
	// A decoding error after samples were read still leaves a usable
	// profile of the records before it: keep it and say where decoding
	// stopped. Before any sample there is nothing to report.
	decodeErr := r.Err()
	if decodeErr != nil && ru.tr == nil {
		return nil, decodeErr
	}
	if ru.tr == nil {
		if err := ru.setup(); err != nil {
			return nil, ru.explainTruncated(err)
		}
	}
	ru.st.releaseAll()
	ru.tr.Close()
	if err := ru.finishWindows(); err != nil {
		return nil, err
	}
	ru.b.Infer(ru.st.weights)
	if n := opts.workers(); n > 1 {
		sess.NameStacks(false, n) // name the stacks' frames on every core
	}
	p := ru.b.Profile(report.NewSymbols(sess))
	p.DurationNanos = int64(r.Stats().LastSample - r.Stats().FirstSample)
	p.TimeNanos = 0
	res := &Result{Profile: p}
	s := &res.Summary
	s.Events = ru.counts
	for _, e := range s.Events {
		s.LostTotal += e.Lost
	}
	s.LostBuffer = ru.lostBuffer
	if cl := r.Meta().Cmdline; len(cl) >= 2 && path.Base(cl[0]) == "faultline" && cl[1] == "record" {
		s.FromRecord = true
	}
	p.Comments = append(p.Comments, lossComments(s.Events)...)
	s.NoFaultStacks = ru.opts.Mode == report.ByTouch && !ru.faultStacks()
	if ru.sel != nil {
		ru.sel.finish(sess.Comm)
		s.Selection = ru.sel
	}
	if ru.st.leafMode {
		s.StackJoin = &ru.st.join
		s.AllocStacks = ru.b.StackTotals()
		if ru.st.top.Words > 0 {
			s.TopStacks = &ru.st.top
		}
	}
	s.Resident = ru.residentSummary(p)
	if opts.Timeline {
		pts, start, tick, faults := ru.b.Res.Timeline()
		// The owners become the profile's samples.
		out := pts[:0]
		for _, pt := range pts {
			if pt.Owner = ru.b.SampleOf(pt.Owner); pt.Owner >= 0 {
				out = append(out, pt)
			}
		}
		res.Timeline = &Timeline{Points: out, Start: start, Tick: tick, Faults: faults,
			First: r.Stats().FirstSample, Last: r.Stats().LastSample, Snapshots: ru.snap.points}
	}
	s.LostWindows = ru.lost.LostWindows
	s.Tracker = ru.tr.Stats()
	// posix_memalign calls whose return carried only the status are
	// unpaired, not failed.
	s.Tracker.FailedAllocations -= ru.noPointer
	s.Tracker.UnpairedReturns += ru.noPointer
	s.Classes = ru.classes
	s.Unwind = sess.Stats()
	if ru.opts.Mode == report.ByAlloc {
		s.TopSites = report.TopSites(p, 10, opts.RawSites)
	}
	if ru.noAllocator {
		s.Fallbacks = append(s.Fallbacks, noAllocatorNote)
	}
	if ru.opts.Attr.WindowMode {
		s.Fallbacks = append(s.Fallbacks, fmt.Sprintf("no malloc return probe: faults attributed to the thread's most recent allocation within %v ms (approximate)", float64(ru.opts.Attr.Window)/1e6))
	} else if s.Tracker.MmapBySize > 0 {
		s.Fallbacks = append(s.Fallbacks, "no anonymous mmap events (record with -d) and no chunk header: the mmap flag was judged by size ≥ the mmap threshold")
	}
	s.Warnings = append(s.Warnings, r.Warnings()...)
	s.WarningsDropped = r.WarningCount() - len(r.Warnings())
	s.Truncated = r.Meta().Truncated
	if decodeErr != nil {
		s.Warnings = append(s.Warnings, fmt.Errorf("decoding stopped: %w; the profile covers the records before it", decodeErr))
		s.Truncated, s.DecodeError = true, decodeErr.Error()
	}
	s.Warnings = append(s.Warnings, sess.Warnings()...)
	s.Warnings = append(s.Warnings, ru.warnings...)
	if m, d := ru.preload.Result(); len(m)+len(d) > 0 {
		s.Warnings = append(s.Warnings, unshimmedWarning(m, d))
	}
	if w := noAllocations(&s.Tracker, s.Classes, r.Meta().Cmdline); w != nil && !ru.noAllocator {
		s.Warnings = append(s.Warnings, w)
	}
	if w := unattributed(&s.Tracker, s.Classes, s.Resident.MappedFaults, r.Meta().BuildIDs); w != nil {
		s.Warnings = append(s.Warnings, w)
	}
	if opts.Done != nil {
		opts.Done()
	}
	return res, nil
}

// unshimmedWarning names the programs of an in-process recording whose
// allocator calls it does not hold (schema.PreloadCheck).
func unshimmedWarning(missed, detached []schema.ExecProcess) error {
	var parts []string
	if len(missed) > 0 {
		parts = append(parts, fmt.Sprintf("%d ran without the in-process shim (%s: their own LD_PRELOAD, a cleared environment, a static or set-uid program)", len(missed), schema.NameProcesses(missed)))
	}
	if len(detached) > 0 {
		parts = append(parts, fmt.Sprintf("%d loaded it but could not reach the recorder's rings (%s: privileges dropped before the exec)", len(detached), schema.NameProcesses(detached)))
	}
	return fmt.Errorf("programs whose allocator calls are not in the recording, so their faults are not attributed: %s", strings.Join(parts, "; "))
}

// records feeds every record of the reader to the run, serially.
func (ru *run) records() error {
	if ru.win != nil {
		return ru.windowRecords()
	}
	if ru.opts.Workers != 1 {
		if ok, err := ru.pipeline(); ok || err != nil {
			return err
		}
	}
	var n uint64
	for ru.r.Next() {
		rec := ru.r.Record()
		n++
		if ru.opts.Progress != nil && n&0xfff == 0 {
			ru.opts.Progress(rec.Common().Offset)
		}
		if err := ru.handle(rec); err != nil {
			return err
		}
	}
	return nil
}

// handle feeds one record, in time order, to the session and the tracker.
func (ru *run) handle(rec perfdata.Record) error {
	switch rec := rec.(type) {
	case *perfdata.Sample:
		if ids := ru.r.Meta().BuildIDs; len(ids) != ru.nBuildIDs {
			ru.sess.AddBuildIDs(ids[ru.nBuildIDs:])
			ru.nBuildIDs = len(ids)
		}
		// In pipe mode the attrs arrive as records, all before the
		// first sample; a file has them in its header.
		if len(ru.r.Events()) != ru.nEvents {
			if err := ru.setup(); err != nil {
				return ru.explainTruncated(err)
			}
			ru.nEvents = len(ru.r.Events())
		}
		ru.sample(rec)
	case *perfdata.LostSamples:
		// Per-event losses come from LOST_SAMPLES alone: perf writes a
		// LOST record for the same losses, counted per ring buffer.
		if rec.Event != nil && rec.Event.Index < len(ru.counts) {
			ru.counts[rec.Event.Index].Lost += rec.Count
		}
		ru.lostRecord(&rec.SampleID, rec.Event, rec.Count, true)
	case *perfdata.Lost:
		ru.lostBuffer += rec.Count
		ru.lostRecord(&rec.SampleID, rec.Event, rec.Count, false)
	default:
		ru.observe(rec)
	}
	return nil
}

// explainTruncated adds the reader's truncation warning to an error about
// missing events: a file cut short loses its feature section (event names,
// probe formats), which is why the events cannot be identified.
func (ru *run) explainTruncated(err error) error {
	noFormat := false
	for _, ev := range ru.r.Events() {
		if ev.Attr.Type == perfdata.TypeTracepoint && ev.Format == nil {
			noFormat = true
		}
	}
	if !noFormat {
		return err
	}
	const why = "the recording lacks its probes' formats (the TRACING_DATA feature, written after the data)"
	if ws := ru.r.Warnings(); len(ws) > 0 {
		return fmt.Errorf("%w; "+why+": %w", err, ws[0])
	}
	return fmt.Errorf("%w; "+why, err)
}

// setup classifies the events (again, in pipe mode, as new ones arrive) and
// picks the attribution mode.
func (ru *run) setup() error {
	// Before the first sample is unwound: a pipe's ARCH feature arrives
	// after the session was made.
	if err := ru.sess.CheckArch(); err != nil {
		return err
	}
	evs := ru.r.Events()
	for len(ru.infos) < len(evs) {
		ev := evs[len(ru.infos)]
		in, err := classify(ev, ru.opts.Events)
		if err != nil {
			return err
		}
		ru.infos = append(ru.infos, in)
		ru.counts = append(ru.counts, EventSummary{Name: ev.Name, Role: in.role.String()})
	}
	pairStackEvents(ru.infos)
	for i, in := range ru.infos {
		ru.counts[i].Role = in.role.String()
		if (in.role == RoleAllocEntry || in.role == RoleAllocCall) && !hasStacks(in.ev) {
			ru.st.stackless(in)
		}
	}
	if ru.tr != nil {
		return nil
	}
	var entries, returns, faults int
	anonMmaps := false
	for _, in := range ru.infos {
		if in.guess {
			// A probe without its format: assume the usual pair (entry and
			// return); its samples say which it is.
			entries++
			returns++
		}
		switch in.role {
		case RoleAllocEntry:
			entries++
		case RoleAllocReturn:
			returns++
		case RoleAllocCall:
			entries++
			returns++
		case RoleFault:
			faults++
		}
		if in.ev.Attr.MmapData() { // anonymous mmaps recorded (-d)
			anonMmaps = true
		}
	}
	if len(evs) == 0 {
		// A pipe-mode stream cut before its attrs, or a file whose attr
		// section is empty: nothing can be decoded.
		return ErrNoEvents
	}
	if faults == 0 {
		return &MissingEventError{Role: RoleFault, Events: eventNames(evs)}
	}
	if entries == 0 {
		if !ru.faultStacks() {
			return &MissingEventError{Role: RoleAllocEntry, Events: eventNames(evs)}
		}
		ru.touchOnly()
	}
	if returns == 0 && !ru.noAllocator {
		ru.opts.Attr.WindowMode = true
	}
	ru.opts.Attr.AnonMmapEvents = anonMmaps
	ru.b = report.NewBuilder(ru.opts.Mode, ru.sess.Comm)
	ru.b.RawSites = ru.opts.RawSites
	ru.b.TouchSites = ru.noAllocator
	ru.b.Res = attribute.NewResident(ru.opts.Timeline)
	ru.b.OwnerAt = ru.ownerAt
	for _, in := range ru.infos {
		ru.b.Res.Snapshots = ru.b.Res.Snapshots || in.role == RoleSnapshot
		ru.mm.sysEvents = ru.mm.sysEvents || in.role == RoleSysEnter
	}
	ru.b.ThreadOf = ru.threadName
	if ru.st.leafMode {
		ru.b.StackKind = ru.st.kind
	}
	if ru.win != nil {
		ru.win.b = ru.b.NewWindow()
	}
	ru.tr = attribute.NewTracker(ru.opts.Attr, &countingSink{Builder: ru.b, classes: ru.classes, mm: ru.mm, win: ru.win}, regions{ru.sess})
	ru.st.out = ru.tr
	ru.tr.OnCredit = ru.b.Touch
	ru.tr.OnEnd = ru.allocEnd
	return nil
}

// faultStacks reports whether some fault event carries stacks: itself, or
// through a stack instance.
func (ru *run) faultStacks() bool {
	for _, in := range ru.infos {
		if in.role == RoleFault && hasStacks(in.ev) || in.role == RoleStack && ru.infos[in.stackFor].role == RoleFault {
			return true
		}
	}
	return false
}

func eventNames(evs []*perfdata.Event) string {
	var names []string
	for _, e := range evs {
		names = append(names, e.Name)
	}
	return strings.Join(names, ", ")
}

func (ru *run) observe(rec perfdata.Record) {
	ru.sess.Observe(rec)
	switch r := rec.(type) {
	case *perfdata.Comm:
		ru.threads[r.Tid] = r.Comm
		if ru.win != nil {
			delete(ru.win.exited, r.Tid)
		}
		if r.Exec {
			ru.preload.Exec(r.Pid, r.Comm)
		}
	case *perfdata.Mmap:
		ru.preload.Mmap(r.Pid, r.Filename)
	case *perfdata.Exit:
		if r.Pid == r.Tid {
			ru.preload.Exit(r.Pid)
		}
		if ru.win != nil {
			ru.win.exited[r.Tid] = true
		}
	}
	if ru.tr == nil {
		// Before the first sample (pipe mode's attrs and tracing data may
		// still be arriving) nothing is live, so there is nothing to
		// fork, exec or end; the maps are kept by the session.
		return
	}
	switch rec.(type) {
	case *perfdata.Comm, *perfdata.Fork, *perfdata.Exit:
		ru.st.releaseAll() // held calls and faults happened before
	}
	switch r := rec.(type) {
	case *perfdata.Mmap:
		anon := r.Filename == "//anon" || strings.HasPrefix(r.Filename, "/dev/zero") || strings.HasPrefix(r.Filename, "/anon_hugepage")
		ru.tr.Mmap(r.Pid, r.Time, r.Addr, r.Len, anon)
		if r.Filename == "//anon" {
			ru.kernelMap(r)
		}
	case *perfdata.Comm:
		if r.Exec {
			ru.tr.Exec(r.Pid)
			ru.b.Res.Exec(r.Pid, r.Time)
			ru.mm.exit(r.Pid)
		}
	case *perfdata.Fork:
		ru.tr.Fork(r.Ppid, r.Pid)
		ru.b.Res.Fork(r.Ppid, r.Pid)
	case *perfdata.Exit:
		ru.st.exit(r.Tid)
		ru.tr.Exit(r.Pid, r.Tid)
		delete(ru.mm.pending, r.Tid)
		if r.Pid == r.Tid {
			ru.b.Res.Exit(r.Pid, r.Time)
			ru.mm.exit(r.Pid)
		}
	}
}

func (ru *run) sample(smp *perfdata.Sample) {
	if smp.Event == nil || smp.Event.Index >= len(ru.infos) {
		return
	}
	in := ru.infos[smp.Event.Index]
	ru.counts[smp.Event.Index].Samples++
	if in.guess {
		ru.guessRole(in, smp)
		ru.counts[smp.Event.Index].Role = in.role.String()
	}
	ru.lost.sample(smp.Event.Index, &smp.SampleID)
	if ru.sel != nil && !ru.sel.keep(in.role, smp.Pid, ru.sess.Comm(smp.Pid), ru.threads[smp.Tid]) {
		return
	}
	// In this order: settle the thread's held sample, decode, unwind, then
	// join (stacks) and track.
	ru.st.settle(in, smp)
	switch in.role {
	case RoleStack:
		id, ret := ru.unwind(smp)
		ru.st.stack(in, ru.infos[in.stackFor], smp, id, ret)
	case RoleAllocEntry:
		e := ru.entryOf(in, smp)
		unwound := hasStacks(in.ev) // range events carry none: no walk to count
		if unwound {
			e.Stack, e.CallerRet = ru.unwind(smp)
		}
		ru.st.entry(in, smp, e, unwound)
	case RoleAllocCall:
		ru.st.entry(in, smp, ru.entryOf(in, smp), false)
		ru.allocReturn(in, smp)
	case RoleAllocReturn:
		ru.allocReturn(in, smp)
	case RoleFree:
		f := &ru.free
		*f = attribute.Free{Pid: smp.Pid, Tid: smp.Tid, Time: smp.Time}
		f.Ptr, _ = in.ptr.Uint64(smp.Raw)
		ru.freeCall(f)
	case RoleFault:
		if !ru.mm.ran[smp.Pid] {
			ru.mm.ran[smp.Pid] = true
		}
		f := ru.faultOf(in, smp)
		if hasStacks(in.ev) {
			f.Stack = ru.stackOf(smp)
		}
		ru.st.fault(in, smp, f)
	case RoleSysEnter, RoleSysExit:
		ru.sysSample(in, smp)
	case RoleRSS:
		ru.rssSample(in, smp)
	case RoleSnapshot:
		ru.snapshotSample(in, smp)
	}
}

// allocReturn feeds an allocator return (or a whole call's return part).
func (ru *run) allocReturn(in *eventInfo, smp *perfdata.Sample) {
	rt := &ru.ret
	*rt = attribute.Return{Pid: smp.Pid, Tid: smp.Tid, Time: smp.Time, Kind: in.kind}
	rt.Ptr, _ = in.ptr.Uint64(smp.Raw)
	if in.retIP != nil {
		rt.RetIP, _ = in.retIP.Uint64(smp.Raw)
	}
	if in.hdr != nil {
		rt.Hdr, rt.HasHdr = in.hdr.Uint64(smp.Raw)
		if rt.HasHdr && rt.Hdr != 0 {
			ru.mm.chunkHeaders = true
		}
	}
	if in.statusReturn && rt.Ptr < 4096 {
		// 0 or an errno: the call is counted as unpaired, its faults
		// go by address (the tracker sees a failed call).
		ru.noPointer++
		rt.Ptr = 0
	}
	if rt.Ptr != 0 {
		rt.Leaf = ru.st.returnLeaf(smp.Pid, rt.RetIP)
	}
	ru.tr.Return(rt)
}

// entryOf reads an allocator entry sample's arguments (no stack).
func (ru *run) entryOf(in *eventInfo, smp *perfdata.Sample) *attribute.Entry {
	e := &ru.entry
	*e = attribute.Entry{Pid: smp.Pid, Tid: smp.Tid, Time: smp.Time, Kind: in.kind}
	e.Size, _ = in.size.Uint64(smp.Raw)
	if in.nmemb != nil {
		n, _ := in.nmemb.Uint64(smp.Raw)
		e.Size *= n
	}
	if in.oldPtr != nil {
		e.OldPtr, _ = in.oldPtr.Uint64(smp.Raw)
	}
	if in.zeroFlag != nil {
		if f, _ := in.zeroFlag.Uint64(smp.Raw); f&mallocxZero != 0 {
			e.Kind = attribute.KindCalloc // zeroed, as calloc's
		}
	}
	return e
}

// mallocxZero is jemalloc's MALLOCX_ZERO flag, as its public header
// defines it.
const mallocxZero = 0x40

// faultOf reads a fault sample's address and access (no stack).
func (ru *run) faultOf(in *eventInfo, smp *perfdata.Sample) *attribute.Fault {
	f := &ru.fault
	*f = attribute.Fault{Pid: smp.Pid, Tid: smp.Tid, Time: smp.Time, Addr: smp.Addr, PageSize: smp.DataPageSize}
	if smp.Has&perfdata.SampleTime != 0 {
		ru.lost.fault(smp.Time)
	}
	if in.address != nil {
		f.Addr, _ = in.address.Uint64(smp.Raw)
	}
	if in.errorCode != nil {
		code, _ := in.errorCode.Uint64(smp.Raw)
		f.Access = attribute.AccessFromX86ErrorCode(code)
	}
	return f
}

// lostRecord opens a lost-events window when the loss may concern
// allocation events: always for a buffer overflow (LOST), for LOST_SAMPLES
// when the event is an allocation probe or unknown.
// samples tells LOST_SAMPLES (count lost of event e) from LOST (count lost
// from a ring buffer that e owns).
func (ru *run) lostRecord(id *perfdata.SampleID, e *perfdata.Event, count uint64, samples bool) {
	ev := -1
	if e != nil && e.Index < len(ru.infos) {
		switch ru.infos[e.Index].role {
		case RoleAllocEntry, RoleAllocReturn, RoleAllocCall, RoleFree:
			ev = e.Index
		case RoleStack:
			// A stack ring holds stack samples only: no call was lost.
			return
		default:
			if samples {
				return
			}
		}
	}
	ru.lost.lost(id, count, samples, ev)
}

// threadName is the thread label: the tid and the name the recording's
// COMM records gave the thread, else its process's name.
func (ru *run) threadName(pid, tid uint32) string {
	name, ok := ru.threads[tid]
	if !ok {
		name = ru.sess.Comm(pid)
	}
	return strconv.FormatUint(uint64(tid), 10) + " " + name
}

// regions classes unattributed faults from the maps at the time.
type regions struct{ s *symbolize.Session }

func (g regions) Region(pid uint32, addr uint64) attribute.Class {
	m := g.s.Region(pid, addr)
	if m == nil {
		// The stack grows below its recorded mapping without an mmap event.
		if st := g.s.Region(pid, addr+1<<20); st != nil && strings.HasPrefix(st.File, "[stack") {
			return attribute.Class{Kind: attribute.ClassStack}
		}
		return attribute.Class{Kind: attribute.ClassUnknown}
	}
	switch {
	case strings.HasPrefix(m.File, "[stack"):
		return attribute.Class{Kind: attribute.ClassStack}
	case m.File == "[heap]":
		return attribute.Class{Kind: attribute.ClassHeap}
	case m.Anon():
		return attribute.Class{Kind: attribute.ClassAnon}
	}
	return attribute.Class{Kind: attribute.ClassFile, Name: path.Base(m.File)}
}

// countingSink counts unattributed faults by class on their way to the builder.
type countingSink struct {
	*report.Builder
	classes map[string]uint64
	mm      *memMaps
	win     *windows // also counts into the current window's builder
}

// Allocation counts a in the run and in the current window.
func (c *countingSink) Allocation(a *attribute.Allocation) {
	if c.runCounts() {
		c.Builder.Allocation(a)
	}
	if c.win != nil {
		c.win.b.Allocation(a)
	}
}

// Fault gives a fault no allocation explains to the program's own mapping
// that holds it, if any (memmap.go).
func (c *countingSink) Fault(f *attribute.Fault, a *attribute.Allocation) {
	if a == nil {
		if m := c.mm.find(f.Pid, f.Addr); m != nil && m.site.kernel {
			// Counted, not attributed: no call's stack names it.
			if !m.site.counted {
				m.site.counted = true
				c.mm.kernelMaps++
			}
			c.mm.kernelFaults++
		} else if m != nil {
			if !m.site.counted {
				m.site.counted = true
				c.Allocation(&m.site.alloc)
			}
			a = &m.site.alloc
			c.mm.mapped++
		}
		// Unexplained faults reach the sink at once: their pages are
		// followed here (the tracker's OnCredit follows the others').
		c.Builder.Touch(f, a)
	}
	if a == nil {
		c.classes[f.Class.String()]++
	}
	if c.runCounts() {
		c.Builder.Fault(f, a)
	}
	if c.win != nil {
		c.win.b.Fault(f, a)
	}
}

// runCounts reports whether the run's builder counts samples of its own
// (not with WindowOptions.WindowsOnly).
func (c *countingSink) runCounts() bool { return c.win == nil || !c.win.opts.WindowsOnly }

// residentSummary sums the profile's resident values by site.
func (ru *run) residentSummary(p *profile.Profile) ResidentSummary {
	res := ru.b.Res
	pages, t := res.PeakPages()
	rs := ResidentSummary{PeakBytes: pages * attribute.PageSize, Refaults: res.Refaults(),
		MapCalls: ru.mm.calls, MappedFaults: ru.mm.mapped, MapEvents: ru.mm.sysEvents,
		KernelMaps: ru.mm.kernelMaps, KernelMapFaults: ru.mm.kernelFaults, ProcessHWM: ru.mm.hwm, ProcessAnon: ru.mm.anon}
	rs.Start = ru.r.Stats().FirstSample
	if t >= rs.Start {
		rs.PeakTime = t - rs.Start
	}
	rs.AtPeak = report.TopBy(p, report.SampleResidentPeak, 5, ru.opts.RawSites, nil)
	if vi := report.ValueIndex(p, report.SampleResidentEnd); vi >= 0 {
		for _, s := range p.Sample {
			rs.EndBytes += s.Value[vi]
		}
	}
	rs.Churn = report.TopBy(p, report.SampleFaults, 5, ru.opts.RawSites, report.IsRefault)
	rs.Snapshots = ru.snap.summary(res)
	ru.processes(&rs)
	return rs
}

// ErrNoAllocations says a recording has faults but not one allocator call:
// the probed allocator is not the one the program calls. The error that
// says it is a *NoAllocationsError.
var ErrNoAllocations = errors.New("no allocator call was recorded")

// NoAllocationsError is a recording with faults on anonymous memory and not
// one allocator call. It matches ErrNoAllocations (errors.Is).
type NoAllocationsError struct {
	Faults uint64 // the recording's page faults
	Libc   string // the allocator the recording was told to probe (record --libc); "" if none
}

func (e *NoAllocationsError) Error() string {
	if e.Libc != "" {
		return fmt.Sprintf("%v (%d faults): this recording probed %s (--libc), which the program's malloc does not bind to", ErrNoAllocations, e.Faults, e.Libc)
	}
	return fmt.Sprintf("%v (%d faults): the probed allocator is not the one the program calls (a statically linked or stripped allocator?)", ErrNoAllocations, e.Faults)
}

// Is reports whether target is ErrNoAllocations.
func (e *NoAllocationsError) Is(target error) bool { return target == ErrNoAllocations }

// ErrNoEvents says a recording describes no events: a pipe-mode stream cut
// before its attrs, or a file whose attr section is empty.
var ErrNoEvents = errors.New("the recording describes no events (it ends before any attr)")

// MissingEventError says a recording lacks the event of a role analysis
// needs: page faults (RoleFault) or allocator entries (RoleAllocEntry).
type MissingEventError struct {
	Role   Role
	Events string // the events it has, comma-separated
}

func (e *MissingEventError) Error() string {
	what := "allocator entry probe"
	if e.Role == RoleFault {
		what = "page-fault event"
	}
	return fmt.Sprintf("the recording has no %s (events: %s)", what, e.Events)
}

// EmptyMinPages is how many faults on anonymous memory ([heap] and
// [anon], 1 MiB of pages) a recording without one allocator call must have
// to be an empty answer: a program that never allocates (true) still
// faults a few such pages while its loader starts it.
const EmptyMinPages = 256

// noAllocations explains a recording whose faults met no allocation
// because no allocator call was recorded at all; classes are its unattributed faults by class, cmdline its
// command line.
func noAllocations(st *attribute.Stats, classes map[string]uint64, cmdline []string) error {
	if st.Allocations > 0 || st.FailedAllocations > 0 || classes["[heap]"]+classes["[anon]"] < EmptyMinPages {
		return nil
	}
	libc := ""
	for i, a := range cmdline {
		if v, ok := strings.CutPrefix(a, "--libc="); ok {
			libc = v
		} else if a == "--libc" && i+1 < len(cmdline) {
			libc = cmdline[i+1]
		}
	}
	return &NoAllocationsError{Faults: st.Faults, Libc: libc}
}
