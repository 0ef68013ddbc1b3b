// Package recorder records what faultline analyze needs with
// perf_event_open itself: the program's allocator calls from a Source
// (source.go: uprobes on the allocator's entry points, uprobes.go, or a
// shim preloaded into the command, inproc.go), its page faults and
// memory-map calls, the allocation entries again with DWARF stacks (every
// allocation of at least StackMin bytes, 1 in StackEvery of the smaller
// ones), and the MMAP2/COMM/FORK/EXIT sideband; it writes a perf.data,
// file or pipe mode, through perfdata.Writer, with the event names and
// fields perfdata/schema defines. The setup around a recording is here
// too (setup.go: the method's choice, privileges, the allocator to probe,
// the build-id cache; probes.go: tracefs and the probes), reached through
// System; the command adds its flags and its summary.
package recorder

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/perfwarm"
	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
	"golang.org/x/sys/unix"
)

// Probe is one uprobe event of the run's group, already in tracefs.
type Probe struct {
	Event  string // name in the group: "malloc", "malloc__return"
	ID     uint64 // tracefs event id (events/GROUP/EVENT/id)
	Format []byte // events/GROUP/EVENT/format, for TRACING_DATA
	// Sized marks an allocation entry with a size argument: it is opened
	// again with stacks. HasNmemb adds calloc's and reallocarray's nmemb.
	Sized, HasNmemb bool
	// Stack: a memory-map call sampled with a stack (sys_enter_mmap).
	Stack bool
}

// Config is one recording: where the allocator calls come from (Source),
// what is recorded (Target), and how (StackOptions, RingOptions,
// OutputOptions, SnapshotOptions). The option structs are embedded: cfg.Cmd reads
// cfg.Target.Cmd.
type Config struct {
	// Source records the allocator calls: *UprobeSource or *InProcessSource.
	Source Source
	// MapCalls are the memory-map calls' syscall tracepoints (group
	// schema.SyscallSystem: schema.SyscallEvents), recorded by both
	// methods, every call; sys_enter_mmap with a stack (the mapping's
	// site).
	MapCalls []Probe
	Target
	StackOptions
	RingOptions
	OutputOptions
	SnapshotOptions
}

// Target is what a recording follows: Cmd (Cmd[0] resolved to a path,
// Argv its argv), or Pid, or All (system-wide; with Cmd too when given),
// and the command's streams and stop requests.
type Target struct {
	Cmd      string
	Argv     []string
	Pid      int
	All      bool
	NoTHP    bool          // PR_SET_THP_DISABLE for Cmd
	Duration time.Duration // 0: until Cmd exits or a signal

	Signals <-chan os.Signal // stop requests (SIGINT, SIGTERM, SIGHUP)
	// Following, if set, is told when Cmd has exited and processes it
	// started still run: the recording goes on until they exit or a stop
	// request.
	Following func([]Process)
	Stdin     io.Reader // Cmd's standard streams
	Stdout    io.Writer
	Stderr    io.Writer
}

// SnapshotOptions say when each process's resident anonymous memory is
// read from its page tables (snapshot.go): every ResidentEvery while it
// runs (0: never), and as each process of Cmd calls exit_group
// (ExitSnapshots).
type SnapshotOptions struct {
	ResidentEvery time.Duration
	ExitSnapshots bool
}

// StackOptions say which events carry a user stack.
type StackOptions struct {
	StackMin   uint64 // every allocation of at least this many bytes gets a stack
	StackEvery uint64 // 1 in this many of the smaller ones does
	// StackSize is the most user stack bytes a stack sample carries. The
	// in-process shim copies from the stack pointer to the top of the
	// thread's stack, at most this; the kernel copies KernelStackSize.
	StackSize uint32
	// KernelStackSize is the user stack bytes the kernel copies per stack
	// sample it takes (uprobe entries, faults, sys_enter_mmap): always
	// that many, whatever the stack's depth (perf_event_attr's
	// sample_stack_user). 0: StackSize.
	KernelStackSize uint32
	FaultStacks     bool // also sample page faults with stacks, 1 in StackEvery
}

// kernelStackSize is the user stack bytes the kernel copies per stack
// sample.
func (o *StackOptions) kernelStackSize() uint32 {
	return cmp.Or(o.KernelStackSize, o.StackSize)
}

// RingOptions size the kernel's rings.
type RingOptions struct {
	RangePages int // ring size per CPU for range events, in pages (power of two)
	StackPages int // ring size per CPU for stack events
}

// OutputOptions say how the recording is written (output.go): Pipe
// writes pipe mode to a stream (perf record -o -), else file mode to a
// WriterTarget; Compress writes the data as zstd COMPRESSED records (perf
// -z).
type OutputOptions struct {
	Pipe, Compress bool
	Cmdline        []string // faultline's own command line, for CMDLINE
}

// EventCount is what one event of the recording delivered and lost.
type EventCount struct {
	Name    string
	Stack   bool   // a stack instance (its loss never drops a range event)
	Filter  string // its filter, if any
	Samples uint64
	Lost    uint64 // LOST_SAMPLES as the kernel counted them
}

// Result describes a finished recording. The parts are embedded:
// res.RangeLost reads res.Loss.RangeLost.
type Result struct {
	Method string // "in-process" or "uprobes"
	Events []EventCount
	Loss
	Written
	Program
	ShimResult
	FirstTime uint64 // the oldest record's time
	LastTime  uint64 // the newest record's time
	// Snapshots is what the page-table reads took (snapshot.go).
	Snapshots SnapshotCounts
	// BuildIDs are the executables mapped, as the BUILD_ID feature lists
	// them: for the build-id cache.
	BuildIDs []perfdata.BuildID
	// NoMmapBuildIDs: the kernel refused build IDs in MMAP2 records (before
	// Linux 5.12); the BUILD_ID feature's come from the files at the end.
	NoMmapBuildIDs bool
	// MappedBy gives each file of BuildIDs a process that mapped it (by
	// its pid in record's PID namespace): a file of a process in another
	// mount namespace is reached through that process's root
	// (BuildIDCache.MappedBy).
	MappedBy map[string]uint32
}

// Loss is what the kernel's rings lost or garbled.
type Loss struct {
	RangeLost uint64 // PERF_RECORD_LOST totals of the range rings
	StackLost uint64 // and of the stack rings
	// Unreadable: bytes of the kernel's rings passed over because they did
	// not start with a record of a possible size (never seen; a kernel or
	// memory fault), so the records in them are missing.
	Unreadable uint64
	// Samples the kernel gave the wrong one of two twinned events
	// (twins.go): repaired in the range rings, dropped from the stack rings.
	TwinsRepaired, TwinsDropped uint64
}

// Written is what the recording's file holds.
type Written struct {
	DataBytes int64 // uncompressed record bytes
	// KeptRaw: record bytes of a compressed recording written as they
	// are, because the compressor fell behind (perfdata KeepUp).
	KeptRaw   int64
	FileBytes int64
}

// Program is how Cmd ended and what it cost.
type Program struct {
	Ran       bool
	ExitCode  int            // exit status, when it exited
	Signal    syscall.Signal // the signal that killed it, or 0
	Wall      time.Duration  // exec to exit
	User, Sys time.Duration
	// MaxRSS is Cmd's peak RSS (wait4's ru_maxrss, file pages included)
	// and PeakRssAnon the largest RssAnon read while it ran (rss.go).
	MaxRSS, PeakRssAnon uint64
	StoppedBy           string // "" (Cmd exited), StoppedByDuration, or a signal's name
	Unfinished          bool   // Cmd was still running when recording stopped (then killed)
	Rest                Descendants
}

// ShimResult is what the in-process method adds: faults on the shim's own
// memory (dropped), what the shim could not record, whether a thread gave
// up waiting for the recorder (and when, CLOCK_MONOTONIC ns), and records
// written out of round order (0 unless a thread stalled for long between
// its clock read and its commit).
type ShimResult struct {
	ShimFaults  uint64
	Shim        shim.Counters
	Abandoned   bool
	AbandonedAt uint64
	Late        uint64
	// TSCJumps counts the times a thread of the program found the TSC
	// disagreeing with CLOCK_MONOTONIC (InProcessSource.TSC), the first at
	// TSCJumpAt: from then on the shim read CLOCK_MONOTONIC.
	TSCJumps  uint32
	TSCJumpAt uint64
	// Stalls say why record may have kept the program waiting.
	Stalls Stalls
	// Unshimmed are the programs of the command's tree that ran without
	// the shim, Detached those whose shim never reached the rings
	// (schema.PreloadCheck): their calls are not recorded.
	Unshimmed, Detached []schema.ExecProcess
}

// StoppedByDuration is Result.StoppedBy when Config.Duration elapsed.
const StoppedByDuration = "duration"

// ErrNoEvents is returned when the kernel refuses to open an event.
var ErrNoEvents = errors.New("cannot open perf events")

// ErrProgramKilled is wrapped into Record's error when the recording failed
// while the program ran, and Record killed the program (SIGKILL) rather
// than leave it running unrecorded.
var ErrProgramKilled = errors.New("the program was killed")

// Record runs one recording into out: a perfdata.WriterTarget positioned
// at 0, or any stream when cfg.Pipe. When it fails, the program it started
// is not left running.
func Record(cfg *Config, out io.Writer) (res *Result, err error) {
	if cfg.Source == nil {
		return nil, errors.New("no event source: Config.Source is nil (give *UprobeSource or *InProcessSource)")
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	rec := &session{cfg: cfg, cpus: cpus, res: &Result{}}
	defer waitClosed() // last: after the events are closed
	defer rec.closeAll()

	src, err := cfg.Source.start(rec)
	if err != nil {
		return nil, err
	}
	defer src.close()
	rec.src = src
	traits := src.traits()
	rec.res.Method = traits.method
	launcher, env := traits.launcher, traits.env
	var starting *startingCommand
	if cfg.Cmd != "" {
		starting, err = startHeld(launcher, cfg.Cmd, cfg.Argv, cfg.NoTHP, cfg.ExitSnapshots && !cfg.All, env, cfg.Stdin, cfg.Stdout, cfg.Stderr)
		if err != nil {
			return nil, err
		}
	}
	// While the guard starts (a Go runtime's start, milliseconds): the
	// events, the file's features and the rings, none of which depends
	// on the pid.
	rec.specs = rec.buildSpecs()
	if rec.head, err = rec.headFeatures(); err != nil {
		if starting != nil {
			starting.abort()
		}
		return nil, err
	}
	var held *heldCommand
	if starting != nil {
		rec.openRings()
		if held, err = starting.wait(); err != nil {
			return nil, err
		}
		defer func() {
			switch {
			case !rec.released:
				held.abort()
			case held.end() && err != nil:
				err = fmt.Errorf("%w; %w (pid %d, SIGKILL)", err, ErrProgramKilled, held.pid)
			}
		}()
	}
	var tids []int
	switch {
	case cfg.All:
		tids = []int{-1}
	case cfg.Pid > 0:
		if tids, err = threadsOf(cfg.Pid); err != nil {
			return nil, err
		}
	default:
		tids = []int{held.pid}
	}
	if err := rec.open(tids); err != nil {
		return nil, err
	}
	perfwarm.Release() // the events just opened keep the kernel's hooks on
	var events []perfdata.WriterEvent
	for _, s := range rec.specs {
		events = append(events, perfdata.WriterEvent{Attr: s.attr, Name: s.name, IDs: rec.ids[s]})
	}
	stalls := startStallWatch()
	defer func() {
		if res != nil {
			res.Stalls = stalls.stop()
		} else {
			stalls.stop()
		}
	}()
	if cfg.Pipe {
		out = &timedWriter{w: out, watch: stalls}
	}
	w, err := newWriter(cfg, traits, out, events, rec.head)
	if err != nil {
		return nil, err
	}
	rec.w = w
	if a, ok := src.(*attached); ok {
		if err := a.attach(); err != nil {
			return nil, err
		}
	} else if cfg.Pid > 0 && cfg.Cmd == "" {
		if err := rec.enable(); err != nil {
			return nil, err
		}
	}
	if cfg.Pid > 0 || cfg.All {
		// After the attach, which the events see from its go on: the
		// shim's mapping is among the process's.
		if err := rec.synthesize(); err != nil {
			return nil, err
		}
	}
	if err := rec.run(held); err != nil {
		return rec.res, err
	}
	return rec.res, rec.finish()
}

// session is one recording in progress: the kernel's events and rings,
// the writer, and the source that records the allocator calls.
type session struct {
	cfg *Config
	src source
	// enabledAt: when enable enabled the events (zero: opened enabled),
	// from which --duration counts.
	enabledAt time.Time
	cpus      []int
	specs     []*spec
	opened    []*openedEvent
	ids       map[*spec][]uint64
	rings     []*ring
	early     map[ringKey]earlyRing // ring owners opened before the pid (openRings)
	w         *perfdata.Writer
	head      *perfdata.WriterFeatures // features known before the data
	res       *Result
	released  bool

	tally
	twins twins
	execFiles
	trackID uint64 // an id of the tracking event, for synthesized records

	residentReads
}

// residentReads are the session's own reads of the program's memory.
type residentReads struct {
	rss        *spec       // faultline:rss (rss.go), with a command
	rssSampler *rssSampler // its RssAnon reads
	snapSpec   *spec       // faultline:resident (snapshot.go), or nil
	snap       *snapshotter
}

// tally is what the session counts of the records it writes.
type tally struct {
	counts  map[uint64]*uint64 // sample id → its spec's count
	perSpec map[*spec]*uint64
	specOf  map[uint64]*spec
	lost    map[*spec]uint64
	firstT  uint64
	lastT   uint64
	// firstStamp is the earliest sample time (a shim call's return, not
	// its entry as in firstT): what the windows start from.
	firstStamp uint64
}

// execFiles are the executable files mapped, for BUILD_ID.
type execFiles struct {
	mmaps map[string]uint32 // executable files mapped, each with the first process that mapped it
	bids  map[string][]byte // their build IDs as MMAP2 records gave them
}

// closeAll unmaps the rings and closes every event. The last close of a
// uprobe event unregisters it, which waits for the kernel's RCU grace
// periods: closing them concurrently takes one wait, not one per event.
func (s *session) closeAll() {
	s.closeEarly()
	for _, r := range s.rings {
		r.unmap()
	}
	var wg sync.WaitGroup
	var static []int
	for _, o := range s.opened {
		switch {
		case o.fd >= 0 && strings.HasPrefix(o.spec.name, schema.SyscallSystem+":"):
			static = append(static, o.fd)
		case o.fd >= 0:
			wg.Add(1)
			go func(fd int) {
				defer wg.Done()
				unix.Close(fd)
			}(o.fd)
		}
	}
	closeInBackground(static)
	wg.Wait()
	s.opened = nil
}

// closeInBackground closes the events of the kernel's static tracepoints
// (the memory-map calls) on a goroutine of its own: the last close of a
// tracepoint's event unregisters it, which waits for an RCU grace period,
// one tracepoint at a time, holding the kernel's event mutex. Record
// waits for it (waitClosed) only when everything else is done, so the
// wait overlaps the writing of the file's end. Nothing is left running
// after record: a helper process holding them instead would outlive it.
func closeInBackground(fds []int) {
	if len(fds) == 0 {
		return
	}
	closing.Add(1)
	go func() {
		defer closing.Done()
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
}

// closing counts the closes closeInBackground has under way.
var closing sync.WaitGroup

// waitClosed waits for closeInBackground's closes.
func waitClosed() { closing.Wait() }

// buildSpecs lists the events in attr order: the range ring's owner, the
// faults, the memory-map calls and the source's events, then the stack
// ring's owner and the stack instances, and faultline:resident and
// faultline:rss last.
func (s *session) buildSpecs() []*spec {
	cfg := s.cfg
	l := &specList{flags: perfdata.AttrSampleIDAll, stackSize: cfg.kernelStackSize()}
	snaps := !cfg.All && (cfg.Cmd != "" || cfg.Pid > 0) && (cfg.ResidentEvery > 0 || cfg.ExitSnapshots && cfg.Cmd != "")
	if s.src.traits().clock || snaps {
		// One clock for the kernel's records and the source's; the
		// snapshots are stamped with CLOCK_MONOTONIC too.
		l.flags |= perfdata.AttrUseClockID
		l.clock = unix.CLOCK_MONOTONIC
	}
	switch {
	case cfg.Cmd != "" && !cfg.All:
		l.flags |= perfdata.AttrDisabled | perfdata.AttrEnableOnExec | perfdata.AttrInherit
	case cfg.Pid > 0:
		// Opened disabled and enabled together once all are open
		// (thread by thread, which takes a while for many threads), or
		// as the shim starts recording (attached.attach): the first
		// window starts with every thread's calls, and no call's faults
		// come before the events.
		l.flags |= perfdata.AttrInherit | perfdata.AttrDisabled
	}
	// The dummies own the rings; the sideband (mappings with build IDs,
	// comms, tasks) rides on minor-faults. The faults are taken as the
	// kernel accounts them once handled (mm_account_fault), not at entry
	// as page-faults is, so a sample's DATA_PAGE_SIZE is the size of the
	// page the fault mapped: 2 MiB for a huge page.
	//
	// Not with a stack twin (--fault-stacks 1 in N): the kernel's shared
	// sample data (twins.go) then writes copies that fit neither layout
	// (perf script: "Can't parse sample"), so the faults go without
	// DATA_PAGE_SIZE and only the page-table reads see huge pages.
	_, uprobes := s.src.(*uprobeSource)
	var pageSize perfdata.SampleFormat = perfdata.SampleDataPageSize
	if cfg.FaultStacks && (cfg.StackEvery > 1 || !uprobes) {
		pageSize = 0
	}
	l.addDummy(kindRange)
	l.add(&spec{name: faultEvents[0], kind: kindRange, attr: perfdata.Attr{
		Type: perfdata.TypeSoftware, Config: uint64(perfdata.SWPageFaultsMin), SamplePeriod: 1,
		SampleType: baseSampleType | perfdata.SampleAddr | pageSize, ReadFormat: readFormat,
		Flags: l.flags | perfdata.AttrExcludeKernel | trackFlags, ClockID: l.clock}})
	s.mapCallSpecs(l.add, l.flags, l.clock)
	major := l.specs[1].attr
	major.Config = uint64(perfdata.SWPageFaultsMaj)
	major.Flags &^= trackFlags
	l.add(&spec{name: faultEvents[1], kind: kindRange, attr: major})
	if cfg.Cmd != "" {
		s.rss = rssSpec(l.flags, l.clock)
	}
	if snaps {
		s.snapSpec = snapSpec(l.flags, l.clock)
	}
	s.src.events(l)
	switch {
	case cfg.FaultStacks && cfg.StackEvery == 1 && uprobes:
		// Every fault: the fault event takes the stack itself. A twin
		// overflowing with it on every fault meets the kernel quirk
		// twins.go repairs on every sample.
		l.specs[1].attr = l.withStack(l.specs[1].attr)
	case cfg.FaultStacks:
		a := l.withStack(l.specs[1].attr)
		a.Flags &^= trackFlags
		a.SamplePeriod = cfg.StackEvery
		l.add(&spec{name: faultEvents[0] + stackEverySuffix(cfg.StackEvery), kind: kindStack, stack: true, attr: a})
	}
	// Last, so the other events keep their places.
	if s.snapSpec != nil {
		l.add(s.snapSpec)
	}
	if s.rss != nil {
		l.add(s.rss)
	}
	return l.specs
}

// specList collects a session's events in attr order, with the flags and
// clock every kernel event of the session shares.
type specList struct {
	specs     []*spec
	flags     perfdata.AttrFlags
	clock     int32
	stackSize uint32
}

func (l *specList) add(sp *spec) { l.specs = append(l.specs, sp) }

// addDummy adds the owner of a ring of kind k: perf's plain dummy:u.
func (l *specList) addDummy(k kind) {
	l.add(&spec{name: "dummy:u", kind: k, dummy: true, attr: perfdata.Attr{
		Type: perfdata.TypeSoftware, Config: uint64(perfdata.SWDummy), SamplePeriod: 1,
		SampleType: baseSampleType, ReadFormat: perfdata.ReadID,
		Flags: l.flags | perfdata.AttrExcludeKernel, ClockID: l.clock}})
}

// withStack returns a with a user stack and registers in each sample. No
// PERF_SAMPLE_PERIOD: with it a tracepoint samples every hit whatever
// sample_period says. CALLCHAIN with the user part excluded is what perf
// record --call-graph dwarf asks for (an empty chain here: these samples
// are taken in user context); perf script and perf report print DWARF
// stacks only with it.
func (l *specList) withStack(a perfdata.Attr) perfdata.Attr {
	a.SampleType |= perfdata.SampleCallchain | perfdata.SampleRegsUser | perfdata.SampleStackUser
	a.Flags |= perfdata.AttrExcludeCallchainUser
	a.SampleRegsUser = userRegsMask
	a.SampleStackUser = l.stackSize
	return a
}

// faultEvents are the names of the fault events: minor faults (the
// sideband rides on them) and major ones.
var faultEvents = [2]string{"minor-faults", "major-faults"}

// mapCallSpecs adds the memory-map calls' tracepoints to the range ring:
// one instance each (no twins), rare enough that sys_enter_mmap takes a
// stack every call.
func (s *session) mapCallSpecs(add func(*spec), flags perfdata.AttrFlags, clock int32) {
	for _, p := range s.cfg.MapCalls {
		a := perfdata.Attr{Type: perfdata.TypeTracepoint, Config: p.ID, SamplePeriod: 1,
			SampleType: baseSampleType | perfdata.SampleRaw, ReadFormat: readFormat, Flags: flags, ClockID: clock}
		if p.Stack && s.cfg.StackSize > 0 {
			a.SampleType |= perfdata.SampleCallchain | perfdata.SampleRegsUser | perfdata.SampleStackUser
			a.Flags |= perfdata.AttrExcludeCallchainUser
			a.SampleRegsUser = userRegsMask
			a.SampleStackUser = s.cfg.kernelStackSize()
		}
		add(&spec{name: schema.SyscallSystem + ":" + p.Event, kind: kindRange, stack: p.Stack && s.cfg.StackSize > 0, attr: a})
	}
}

// A stack instance is named after its range event with a suffix in the
// shape of perf's per-event terms (-e 'EVENT/call-graph=dwarf/'), so that
// faultline info, perf script and perf report tell the three instances of
// one probe apart: faultline_PID:malloc, faultline_PID:malloc/stack-big/
// (every call of at least StackMin bytes) and
// faultline_PID:malloc/stack-1in61/ (1 in StackEvery of the others). No
// '=' and no ':' in the suffix: analyze --event takes NAME=ROLE, and the
// part after the last ':' of a probe's name is its function. Recordings
// made before the suffix have three events of one name; analyze pairs
// instances by their attrs, not their names, and reads both.
const stackBigSuffix = "/stack-big/"

func stackEverySuffix(n uint64) string { return fmt.Sprintf("/stack-1in%d/", n) }

// trackFlags ask for the sideband: mappings (data ones too, with build
// IDs), comms with exec marked, forks and exits.
const trackFlags = perfdata.AttrMmap | perfdata.AttrComm | perfdata.AttrTask | perfdata.AttrMmapData |
	perfdata.AttrMmap2 | perfdata.AttrCommExec | perfdata.AttrBuildID

// sizeFilters are the stack instances' filters for a size argument: the
// two are complements, so no call is sampled twice.
func sizeFilters(min uint64) (big, small string) {
	return fmt.Sprintf("size >= %d", min), fmt.Sprintf("size < %d", min)
}

// sizeFiltersNmemb are the filters for calloc and reallocarray, whose size
// is nmemb × size: a filter cannot multiply, so "big" is either factor ≥
// min, or both ≥ ⌈√min⌉ (then the product is ≥ min). A call whose product
// reaches min with one factor below ⌈√min⌉ and the other below min (e.g.
// calloc(41, 100) at 4096) falls in the 1-in-N class; every "big" call
// really is big unless a factor is 0.
func sizeFiltersNmemb(min uint64) (big, small string) {
	r := uint64(math.Ceil(math.Sqrt(float64(min))))
	big = fmt.Sprintf("size >= %d || nmemb >= %d || (size >= %d && nmemb >= %d)", min, min, r, r)
	small = fmt.Sprintf("size < %d && nmemb < %d && (size < %d || nmemb < %d)", min, min, r, r)
	return big, small
}

// open opens every spec on every CPU for every thread and wires rings.
func (s *session) open(tids []int) error {
	s.ids = map[*spec][]uint64{}
	s.counts = map[uint64]*uint64{}
	s.perSpec = map[*spec]*uint64{}
	s.lost = map[*spec]uint64{}
	s.specOf = map[uint64]*spec{}
	for _, sp := range s.specs {
		sp.count = new(uint64)
		s.perSpec[sp] = sp.count
		if sp.synthetic {
			s.ids[sp] = []uint64{sp.synthID}
			s.counts[sp.synthID] = s.perSpec[sp]
			s.specOf[sp.synthID] = sp
		}
	}
	for _, cpu := range s.cpus {
		leaders := map[kind]int{}
	threads:
		for ti, tid := range tids {
			rangeOf := map[eventSource]uint64{} // this CPU's and thread's range events
			for _, sp := range s.specs {
				if sp.synthetic {
					continue
				}
				o := &openedEvent{spec: sp, cpu: cpu, fd: -1}
				attr := sp.attr
				if sp.dummy && ti == 0 {
					// The ring owner: opened before the pid was known
					// (openRings), or now.
					fd, r, err := s.ringOwner(sp, tid, cpu)
					if err != nil {
						return err
					}
					o.fd = fd
					s.opened = append(s.opened, o)
					leaders[sp.kind] = fd
					s.rings = append(s.rings, r)
					if err := s.noteOpened(o, rangeOf); err != nil {
						return err
					}
					continue
				}
				fd, err := openRaw(&attr, tid, cpu)
				if errors.Is(err, unix.EINVAL) && sp.attr.Flags&perfdata.AttrBuildID != 0 && len(s.ids[sp]) == 0 {
					// A kernel before 5.12: mappings without build IDs
					// (the BUILD_ID feature still lists them).
					sp.attr.Flags &^= perfdata.AttrBuildID
					attr.Flags &^= perfdata.AttrBuildID
					s.res.NoMmapBuildIDs = true
					fd, err = openRaw(&attr, tid, cpu)
				}
				if errors.Is(err, unix.ESRCH) && ti > 0 {
					// A thread of -p's process that exited since it
					// was listed (the first, its leader, owns the rings).
					continue threads
				}
				if err != nil {
					return fmt.Errorf("%w: %s on CPU %d: %w", ErrNoEvents, sp.name, cpu, err)
				}
				o.fd = fd
				s.opened = append(s.opened, o)
				if sp.filter != "" {
					if err := setFilter(fd, sp.filter); err != nil {
						return fmt.Errorf("%s: %w", sp.name, err)
					}
				}
				if err := setOutput(fd, leaders[sp.kind]); err != nil {
					return fmt.Errorf("%s on CPU %d: %w", sp.name, cpu, err)
				}
				if err := s.noteOpened(o, rangeOf); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// eventSource is an event's type and config: a range event and its
// twin share it.
type eventSource struct {
	typ    perfdata.EventType
	config uint64
}

// noteOpened takes o's id from the kernel and files it: under its spec,
// and as a range event of this CPU and thread (rangeOf) or the twin of
// one.
func (s *session) noteOpened(o *openedEvent, rangeOf map[eventSource]uint64) error {
	sp := o.spec
	var err error
	if o.id, err = eventID(o.fd); err != nil {
		return err
	}
	if s.trackID == 0 && sp.attr.Flags&perfdata.AttrMmap2 != 0 {
		s.trackID = o.id
	}
	s.ids[sp] = append(s.ids[sp], o.id)
	s.counts[o.id] = s.perSpec[sp]
	s.specOf[o.id] = sp
	if sp.dummy {
		return nil
	}
	src := eventSource{sp.attr.Type, sp.attr.Config}
	if sp.kind == kindRange {
		rangeOf[src] = o.id
		if s.twins.rangeIDs == nil {
			s.twins.rangeIDs = map[uint64]bool{}
		}
		s.twins.rangeIDs[o.id] = true
	} else if twin, ok := rangeOf[src]; ok {
		if s.twins.twinOf == nil {
			s.twins.twinOf = map[uint64]uint64{}
		}
		s.twins.twinOf[o.id] = twin
	}
	return nil
}

// ringPages is the size of kind k's rings, in pages.
func (s *session) ringPages(k kind) int {
	if k == kindStack {
		return s.cfg.StackPages
	}
	return s.cfg.RangePages
}

// ringOwner is the owner of the ring of sp's kind on cpu, and its ring:
// the one openRings opened, or sp opened now for task tid.
func (s *session) ringOwner(sp *spec, tid, cpu int) (int, *ring, error) {
	k := ringKey{cpu, sp.kind}
	if e, ok := s.early[k]; ok {
		delete(s.early, k)
		return e.fd, e.ring, nil
	}
	return s.openOwner(sp, sp.attr, tid, cpu)
}

// openOwner opens attr, sp's, on cpu for task tid as the owner of a ring,
// and maps its ring: the kernel wakes the poller when the ring is
// ringWatermark full (the recorded attr stays perf's plain dummy:u).
func (s *session) openOwner(sp *spec, attr perfdata.Attr, tid, cpu int) (int, *ring, error) {
	pages := s.ringPages(sp.kind)
	attr.Flags |= perfdata.AttrWatermark
	attr.WakeupEvents = ringWatermark(pages * os.Getpagesize())
	fd, err := openRaw(&attr, tid, cpu)
	if err != nil {
		return -1, nil, fmt.Errorf("%w: %s on CPU %d: %w", ErrNoEvents, sp.name, cpu, err)
	}
	r, err := mapRing(fd, pages, sp.kind, cpu)
	if err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("%w: mapping a %d-page ring on CPU %d: %w (lower --mmap-pages?)", ErrNoEvents, pages, cpu, err)
	}
	return fd, r, nil
}

// ringKey names a ring: its CPU and kind.
type ringKey struct {
	cpu int
	k   kind
}

// earlyRing is a ring's owner opened by openRings, and its ring.
type earlyRing struct {
	fd   int
	ring *ring
}

// openRings opens the rings' owners before the command's pid is known,
// one per CPU and kind, disabled and not inherited, and maps their rings:
// the command's events write into them (PERF_EVENT_IOC_SET_OUTPUT takes
// an event of any task on the owner's CPU), and the kernel's allocation of
// the rings, about a millisecond each here, overlaps the guard's start.
// An owner is the CPU's, not a task's, where record may open those (root,
// or perf_event_paranoid 0 or less): its open does not wait for the
// kernel's first-task-event grace period (package perfwarm), which may
// still run; else it is this process's main thread's, which lives as long
// as record. Where neither opens, open opens the owners on the command as
// before.
func (s *session) openRings() {
	s.early = map[ringKey]earlyRing{}
	owner := -1 // the CPU's
	for _, cpu := range s.cpus {
		for _, sp := range s.specs {
			if !sp.dummy {
				continue
			}
			attr := sp.attr
			attr.Flags = attr.Flags&^(perfdata.AttrInherit|perfdata.AttrEnableOnExec) | perfdata.AttrDisabled
			fd, r, err := s.openOwner(sp, attr, owner, cpu)
			if err != nil && owner == -1 {
				owner = os.Getpid()
				fd, r, err = s.openOwner(sp, attr, owner, cpu)
			}
			if err != nil {
				s.closeEarly()
				return
			}
			s.early[ringKey{cpu, sp.kind}] = earlyRing{fd, r}
		}
	}
}

// closeEarly closes the owners openRings opened that open did not take.
func (s *session) closeEarly() {
	for k, e := range s.early {
		e.ring.unmap()
		unix.Close(e.fd)
		delete(s.early, k)
	}
}

// untilFirst is how long a recording of a running process runs on past
// --duration counted from enable (or the start): to --duration past its
// first sample's time, where its windows start (the reader's order is by
// sample time).
func (s *session) untilFirst() time.Duration {
	if s.cfg.Pid <= 0 || s.firstStamp == 0 {
		return 0
	}
	return time.Duration(int64(s.firstStamp) + int64(s.cfg.Duration) - monotonicNow())
}

// enable enables the events opened disabled (PERF_EVENT_IOC_ENABLE, which
// reaches the events the process's threads inherited too).
func (s *session) enable() error {
	s.enabledAt = time.Now()
	for _, o := range s.opened {
		if err := unix.IoctlSetInt(o.fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
			return fmt.Errorf("%s on CPU %d: %w", o.spec.name, o.cpu, os.NewSyscallError("ioctl PERF_EVENT_IOC_ENABLE", err))
		}
	}
	return nil
}

// eachKernelRecord reads what the kernel's rings hold, a ring's size at
// most from each so a busy ring cannot starve the others, and calls fn
// with each record to keep (its body repaired, twins.repair); it reports
// the bytes read.
func (s *session) eachKernelRecord(fn func(r *ring, raw *rawRecord) error) (int, error) {
	var raw rawRecord
	read := 0
	for _, r := range s.rings {
		for n := 0; n < r.size; {
			if !r.read(&raw) {
				break
			}
			n += int(raw.Header.Size)
			read += int(raw.Header.Size)
			body, keep := s.twins.repair(r.kind, &raw, s.sampleType)
			if !keep {
				continue
			}
			raw.Data = body
			if err := fn(r, &raw); err != nil {
				return read, err
			}
		}
	}
	return read, nil
}

// drain copies what the rings hold to the writer; it reports the bytes.
func (s *session) drain() (int, error) {
	total := 0
	read, err := s.eachKernelRecord(func(r *ring, raw *rawRecord) error {
		if err := s.note(r, raw); err != nil {
			return err
		}
		if err := s.w.WriteRecordParts(uint32(raw.Header.Type), raw.Header.Misc, raw.Data); err != nil {
			return err
		}
		total += int(raw.Header.Size)
		return nil
	})
	if err != nil {
		return read, err
	}
	if total > 0 {
		// perf's promise to readers: nothing after this record is older
		// than what came before the previous one.
		if err := s.w.WriteRecordParts(uint32(perfdata.RecordFinishedRound), 0, nil); err != nil {
			return total, err
		}
	}
	return total, nil
}

// sampleType returns the sample_type of the event with this id.
func (s *session) sampleType(id uint64) (perfdata.SampleFormat, bool) {
	sp := s.specOf[id]
	if sp == nil {
		return 0, false
	}
	return sp.attr.SampleType, true
}

// note counts a record: samples per event, LOST per ring kind, executable
// mappings for BUILD_ID. It allocates only for a file not seen before.
func (s *session) note(r *ring, raw *rawRecord) error {
	d := raw.Data
	switch perfdata.RecordType(raw.Header.Type) {
	case perfdata.RecordSample:
		if len(d) >= 32 {
			if c := s.counts[binary.NativeEndian.Uint64(d)]; c != nil {
				*c++
			}
			t := binary.NativeEndian.Uint64(d[24:])
			if s.firstT == 0 || t < s.firstT {
				s.firstT = t
			}
			if s.firstStamp == 0 || t < s.firstStamp {
				s.firstStamp = t
			}
			if t > s.lastT {
				s.lastT = t
			}
		}
	case perfdata.RecordLost:
		// u64 id, u64 lost, sample_id.
		if len(d) >= 16 {
			n := binary.NativeEndian.Uint64(d[8:])
			if r.kind == kindRange {
				s.res.RangeLost += n
			} else {
				s.res.StackLost += n
			}
		}
	case perfdata.RecordMmap2:
		// pid, tid, addr, len, pgoff, maj/min or build id (24), ino_gen?
		// prot at 56, flags at 60, filename at 64.
		if len(d) > 64 && binary.NativeEndian.Uint32(d[56:])&unix.PROT_EXEC != 0 {
			name := d[64:]
			if i := indexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if _, seen := s.mmaps[string(name)]; !seen {
				s.noteExec(string(name), binary.NativeEndian.Uint32(d))
				// The build ID of what ran: a u8 size, 3 bytes, 20 bytes at 32.
				if raw.Header.Misc&perfdata.MiscMmapBuildID != 0 && d[32] > 0 && d[32] <= 20 {
					if s.bids == nil {
						s.bids = map[string][]byte{}
					}
					s.bids[string(name)] = append([]byte(nil), d[36:36+int(d[32])]...)
				}
			}
		}
	}
	return nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// run releases the command (if any) and drains the rings until it exits,
// the duration passes or a signal asks to stop.
func (s *session) run(held *heldCommand) error {
	cfg := s.cfg
	var timer <-chan time.Time
	if cfg.Duration > 0 {
		d := cfg.Duration
		if !s.enabledAt.IsZero() {
			d -= time.Since(s.enabledAt)
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	// done: the command exited; treeDone: so did everything it started.
	var done, treeDone <-chan struct{}
	start, startNs := time.Now(), monotonicNow()
	if held != nil {
		// A stop request while the events were being opened: do not
		// start the program at all (the deferred abort ends the launcher).
		select {
		case sig := <-cfg.Signals:
			return fmt.Errorf("interrupted by %v before the program started", sig)
		default:
		}
		if s.snapSpec != nil {
			s.snap = startSnapshots(s.snapSpec, held.pid, cfg.ResidentEvery, held.exitNotifier(), s.src.traits().ordered)
		}
		if err := held.release(); err != nil {
			return fmt.Errorf("releasing the command: %w", err)
		}
		s.released = true
		s.res.Ran = true
		done = held.exited
		s.rssSampler = startRSSSampler(held.pid)
		defer s.rssSampler.stop()
	}
	if held == nil && s.snapSpec != nil {
		s.snap = startSnapshots(s.snapSpec, cfg.Pid, cfg.ResidentEvery, -1, false)
	}
	defer s.snap.stop()
	var (
		grace, forward <-chan time.Time
		pending        os.Signal
		stopping       bool
	)
	p, err := newPoller(s.rings)
	if err != nil {
		return err
	}
	defer p.close()
	kick, stop := s.src.wakeups()
	defer stop()
	busy := s.src.traits().busyBytes
	for {
		n, err := s.src.drain(false)
		if err != nil {
			return err
		}
		// A busy ring is read again at once; the select below still sees
		// the program's exit and signals. Otherwise the loop waits for a
		// ring to pass its watermark (the poller), or for the source's
		// wakeups.
		var again <-chan time.Time
		if n > s.rings[0].size/8 || busy > 0 && n > busy {
			again = closedTimeChan
		}
		select {
		case <-done:
			// The guard saw the exit when it happened, even if record was
			// stopped or busy then (SIGSTOP, a stalled output).
			s.res.Wall = time.Since(start)
			if held.statusKnown && held.exitNs > startNs {
				s.res.Wall = time.Duration(held.exitNs - startNs)
			}
			s.exitStatus(held)
			if stopping || !s.followRest(held) {
				return s.finalDrain()
			}
			done, treeDone = nil, held.done
		case <-treeDone:
			return s.finalDrain()
		case sig := <-cfg.Signals:
			if s.res.StoppedBy == "" {
				s.res.StoppedBy = sig.String()
			}
			if held == nil {
				return s.finalDrain()
			}
			if treeDone != nil {
				s.res.Rest.Killed = true
				return s.finalDrain()
			}
			if stopping {
				held.signal(syscall.SIGKILL) // asked twice
				continue
			}
			// Keep recording until the program exits, so the file is
			// complete. A terminal's Ctrl-C (or hangup) reaches the
			// program itself; a signal sent to faultline alone is passed
			// on, a second later if the program is still running, so a
			// program that handles SIGINT does not get it twice.
			stopping, pending = true, sig
			forward = time.After(time.Second)
			grace = time.After(6 * time.Second)
		case <-forward:
			held.signal(pending.(syscall.Signal))
		case <-timer:
			if left := s.untilFirst(); left > 0 {
				// A running process's duration counts from its first
				// sample (the windows' start), which came after enable.
				timer = time.After(left)
				continue
			}
			if s.res.StoppedBy == "" { // not when a stop request came first
				s.res.StoppedBy = StoppedByDuration
			}
			if held == nil {
				return s.finalDrain()
			}
			if treeDone != nil {
				s.res.Rest.Killed = true
				return s.finalDrain()
			}
			held.signal(syscall.SIGINT)
			stopping = true
			grace = time.After(5 * time.Second)
		case <-grace:
			// The program ignores the request: stop recording; Record kills
			// it and its tree on the way out (heldCommand.end).
			s.res.Unfinished = true
			s.res.Wall = time.Since(start)
			return s.finalDrain()
		case err := <-p.errc:
			return err
		case <-s.snap.readyChan():
			if err := s.writeSnapshots(); err != nil {
				return err
			}
		case <-p.wake:
		case <-again:
		case <-kick:
		}
	}
}

// monotonicNow reads CLOCK_MONOTONIC in ns, the clock the guard stamps
// the command's exit with.
func monotonicNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// followRest reports whether processes of the command's tree still run
// now that it has exited, and tells Following of them.
func (s *session) followRest(held *heldCommand) bool {
	select {
	case <-held.done:
		return false
	default:
	}
	if held.statusKnown && !held.rest {
		return false // the guard saw nothing else of the tree: it exits
	}
	rest := descendantsOf(held.guard.Process.Pid)
	if len(rest) == 0 {
		// Gone between the command's exit and the look.
		select {
		case <-held.done:
		case <-time.After(100 * time.Millisecond):
		}
		return false
	}
	s.res.Rest.Procs = rest
	if s.cfg.Following != nil {
		s.cfg.Following(rest)
	}
	return true
}

// finalDrain drains what is left when recording stops.
func (s *session) finalDrain() error {
	defer s.countUnreadable()
	// The final drain writes every kernel record, whatever its time: an
	// exit read from now on holds its process until its records are
	// written.
	s.snap.holdExits()
	_, err := s.src.drain(true)
	return err
}

// countUnreadable totals what the rings passed over (ring.read).
func (s *session) countUnreadable() {
	s.res.Unreadable = 0
	for _, r := range s.rings {
		s.res.Unreadable += r.skipped
	}
}

// closedTimeChan is always ready: the select of a busy loop does not wait.
var closedTimeChan = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

func (s *session) exitStatus(held *heldCommand) {
	if !held.statusKnown {
		return
	}
	ru := &held.rusage
	s.res.User, s.res.Sys = time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
	s.res.MaxRSS = uint64(ru.Maxrss) << 10 // KiB on Linux
	if s.rssSampler != nil {
		s.res.PeakRssAnon = s.rssSampler.stop()
	}
	switch ws := held.status; {
	case ws.Signaled():
		s.res.Signal = ws.Signal()
	default:
		s.res.ExitCode = ws.ExitStatus()
	}
}

// finish writes LOST_SAMPLES per event, closes the events and writes the
// features.
func (s *session) finish() error {
	s.snap.stop()
	s.res.Snapshots = s.snap.counts()
	if err := s.writeSnapshots(); err != nil {
		return err
	}
	if err := s.writeRSS(); err != nil {
		return err
	}
	for _, o := range s.opened {
		if o.fd < 0 {
			continue
		}
		lost, err := readLost(o.fd)
		if err != nil || lost == 0 {
			continue
		}
		// PERF_RECORD_LOST_SAMPLES: u64 lost, then the sample_id trailer
		// (TID, TIME, CPU, IDENTIFIER) naming the event.
		var b [8 + 32]byte
		ne := binary.NativeEndian
		ne.PutUint64(b[0:], lost)
		ne.PutUint64(b[16:], s.lastT)
		ne.PutUint32(b[24:], uint32(o.cpu))
		ne.PutUint64(b[32:], o.id)
		if err := s.w.WriteRecordParts(uint32(perfdata.RecordLostSamples), 0, b[:]); err != nil {
			return err
		}
		s.lost[o.spec] += lost
	}
	s.closeAll()
	for _, sp := range s.specs {
		if sp.dummy {
			continue
		}
		s.res.Events = append(s.res.Events, EventCount{Name: sp.name, Stack: sp.stack, Filter: sp.filter,
			Samples: *s.perSpec[sp], Lost: s.lost[sp]})
	}
	feats := *s.head
	feats.BuildIDs = s.buildIDs()
	feats.SampleTimeFirst, feats.SampleTimeLast = s.firstT, s.lastT
	if err := s.w.Finish(&feats); err != nil {
		return err
	}
	s.res.BuildIDs = feats.BuildIDs
	s.res.MappedBy = s.mmaps
	s.res.DataBytes, s.res.FileBytes = s.w.DataBytes(), s.w.FileBytes()
	s.res.KeptRaw = s.w.UncompressedBytes()
	s.res.FirstTime, s.res.LastTime = s.firstT, s.lastT
	s.res.TwinsRepaired, s.res.TwinsDropped = s.twins.repaired, s.twins.dropped
	return nil
}
