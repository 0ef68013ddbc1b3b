package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/cmd/faultline/internal/launch"
	"github.com/faultline/faultline/cmd/faultline/internal/libc"
	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
	"golang.org/x/sys/unix"
)

const recordHelp = `Usage: faultline record [flags] [--] CMD [ARGS...]
       faultline record [flags] -p PID [--duration D]
       faultline record [flags] -p PID --every D [-o DIR] [--push URL]
       faultline record [flags] -a [--duration D] [-- CMD [ARGS...]]

Records what 'faultline analyze' needs, with perf_event_open itself (the
perf tool is not needed), into a perf.data file that perf script and perf
report read too.

How allocator calls are seen (--method):

  inproc  the default for a CMD that can be preloaded, and for -p (the
          shim injected, --attach): a small shim
          (embedded in faultline) is preloaded into CMD and writes every
          allocator call into a shared-memory ring per thread, with no trap
          into the kernel; record adds no probes. Events: faultline:malloc,
          malloc__return, free and the compact malloc_short and
          malloc__call (a whole call in one sample), with the fields below;
          each thread's calls are stored packed, a few hundred to a
          faultline:packed sample (perf script prints count=N), which
          analyze and faultline script expand (--per-call-samples: one
          sample a call).
  uprobe  a uprobe on every allocator entry and return: a trap per call.
          Used for -a, --libc, -p --attach uprobe, -p of a process the
          shim cannot be injected into, statically linked or setuid programs
          and ones that define malloc themselves (a statically linked
          jemalloc or tcmalloc too): record says why. A program whose
          malloc is jemalloc's, tcmalloc's or mimalloc's shared library
          gets that family's shim, which records its own entry points
          (operator new and delete, mallocx, tc_new, mi_zalloc, ...) too.

What is recorded (the uprobe method's events; the in-process ones carry the
same fields):

  - every call of the allocator's entry points (malloc, calloc, realloc,
    reallocarray, posix_memalign, aligned_alloc/memalign, valloc, pvalloc,
    free, and jemalloc's, tcmalloc's and mimalloc's own, operator new and
    delete among them), with their arguments, returned pointer and (glibc)
    chunk header, and
    every user page fault with its address: no stacks, so they are cheap and
    one ring per CPU (-m) holds them without loss. On x86-64 the allocating
    entries also carry the top of the stack (fields sp, bp and s0..s15, the
    16 words from the stack pointer up: 144 bytes a call), enough to step
    through operator new and its variants to the line that allocated;
  - a DWARF stack (user registers and the stack up to its root frame, at
    most --stack-size bytes) for every allocation of at least --stack-min
    bytes (they own whole pages, so their stacks are exact) and for 1 in
    --stack-every of the smaller ones, in rings of their own
    (--stack-mmap-pages): losing a stack never loses a call. These are
    second instances of the entry probes, named EVENT/stack-big/ and
    EVENT/stack-1inN/ (as faultline info, perf script and perf report show
    them). analyze gives an allocation without a stack
    its exact leaf (the first caller in the program's own code, found from
    those top words; where they do not reach past the allocator's wrappers,
    the address the allocator returned to) and callers inferred from the
    stacks sampled at that leaf;
  - the program's mappings, threads and exits (MMAP2, COMM, FORK, EXIT);
  - the memory-map calls (mmap, munmap, mremap, madvise, brk and sbrk) with
    their arguments and results, an anonymous mmap with its stack, as the
    events syscalls:sys_enter_NAME and sys_exit_NAME: in-process the shim
    records the calls made through the C library (no tracefs, any user;
    the C library's own, such as glibc's malloc trimming its heap, and a
    raw syscall(2) are not seen); with uprobes the kernel's syscall
    tracepoints (--no-map-calls: none).

record does the setup for you:

  - with uprobes, must run as root (uprobes are added in
    /sys/kernel/tracing); in-process, any user may record where
    kernel.perf_event_paranoid is 2 or less; a user's kernel rings for the
    faults are 128 pages per CPU (what perf_event_mlock_kb, 516 KiB by
    default, lets a user lock) against root's 1024, so a program that
    faults fast loses faults sooner as a user (record says when it does);
  - mounts tracefs when it is not mounted (and leaves it mounted);
  - finds the allocator CMD's malloc binds to, as the dynamic linker does
    (the program itself, then LD_PRELOAD, then its DT_NEEDED libraries),
    says which (glibc, jemalloc, tcmalloc, mimalloc) and where, or the
    libc of /proc/PID/maps for -p, and refuses a path with whitespace or
    control characters, which would change what is written to
    uprobe_events;
  - adds its probes in a group of its own, faultline_PID (PID is record's),
    never touches others' probes, removes its own on every exit (also on
    Ctrl-C, SIGTERM, SIGHUP and errors), and removes groups left by a killed
    run whose process is gone;
  - starts CMD held until every event is armed, so nothing of it is missed;
    threads, fork and exec are followed; transparent huge pages stay as the
    system gives them (--no-thp turns them off for it): a fault that maps a
    huge page is known as one and counts the whole page resident;
  - reads every process's resident anonymous memory from its page tables
    (the PAGEMAP_SCAN ioctl) every --resident-every and as each one calls
    exit_group (a seccomp notification stops it there for that read; no
    ptrace), and writes the reads into the recording (faultline:resident):
    analyze sets the resident figures to them, catching what no fault
    shows (huge pages collapsed, pages swapped out, pages shared after
    fork);
  - under sudo, creates the recording as a new file and hands it to the
    user who ran sudo, so analyze needs no root;
  - compresses the records with zstd (as perf record -z; perf 6.1 reads
    it): a recording is about 20 times smaller (--no-compress to turn off);
  - with -o - writes pipe-mode perf.data to standard output, as perf
    record -o - does, so analyze (or perf script -i -) can read it as it
    comes; CMD's standard output then goes to standard error;
  - asks the kernel for the build ID of every mapped file (Linux 5.12+) and
    copies each executable file the program mapped into perf's build-id
    cache (~/.debug of the user who ran sudo, or $PERF_BUILDID_DIR; at most
    --buildid-cache-max MB), so that analyze names and unwinds frames with
    the binary that ran after it is rebuilt or upgraded; --no-buildid-cache
    skips the copies.

Flags after CMD belong to CMD. What recording costs the program: in-process,
a clock read and a few dozen bytes written per allocator call, and the
recorder's own CPU beside it; with uprobes, a trap into the kernel per call,
charged to the program as CPU time, so an allocation-heavy program runs many
times slower. record's summary prints the calls and the program's wall,
user and sys time; docs/performance.md gives the figures measured on one
machine.

A -p process in a container of its own (a mount and PID namespace, as
Docker, containerd and podman run them) is recorded from the host by its
host pid: its files are read through /proc/PID/root. A -p process that
exits ends the recording.

Exit status, as env, nice and timeout have it:
  CMD's own  when CMD ran (128+N when signal N killed it, as a shell says)
  0          -p and -a; CMD that record stopped when --duration elapsed
  125        record itself failed: bad usage, an output it cannot write, a
             missing prerequisite (root, tracefs, libc, --libc) or the recording
  126        CMD was found but cannot be executed
  127        CMD was not found

Example:

  faultline record -o sort.data -- sort -o /dev/null big.txt
  faultline analyze sort.data -o faults.pb.gz
  go tool pprof -top faults.pb.gz

  # a running server for 30 seconds, the shim injected (as root; uprobes
  # where it cannot be, or with --attach uprobe)
  sudo faultline record -p "$(pidof myserver)" --duration 30s

  # a profile per minute into a folder, and to Pyroscope, until Ctrl-C or
  # until the server exits (docs/recording.md, "Continuously")
  sudo faultline record -p "$(pidof myserver)" --every 60s -o myserver-windows \
      --push http://localhost:4040 --push-label env=prod

  # no file in between
  faultline record -o - -- ./app | faultline analyze - -o faults.pb.gz

Flags:
`

// defaultStackEvery is --stack-every's default, chosen by measuring
// testdata/record/src/containers.cpp's recording size at several periods
// (the figures are in the commit that set it; the program's time is the
// uprobe traps' at any period). 1 in 61 keeps stacks at about the
// volume of the calls themselves and still guarantees a stack to any run
// of 61 consecutive calls from one place. The kernel samples every Nth
// call exactly, not at random, so N is prime: a program alternating
// between two or four call sites cannot hide one of them from a
// power-of-two period.
const defaultStackEvery = 61

// defaultStackCap is the in-process shim's most stack bytes per sample
// without --stack-size: the kernel's largest copy. The shim copies from
// the stack pointer to the top of the thread's stack, so a shallow stack
// costs only its own bytes and a deep one reaches its root frame.
const defaultStackCap = 65528

// defaultKernelStackSize is the kernel's stack copy without --stack-size:
// the kernel copies that many bytes at every stack sample, however
// shallow the stack, so the default is not its largest. 32 KiB holds
// sqlite3's stacks (12 KiB at the deepest, 5000 INSERTs) and a 200-frame
// recursion of 112-byte frames (23 KiB), with room to spare.
const defaultKernelStackSize = 32768

// defaultResidentEvery is how often record reads the processes' page
// tables while they run.
const defaultResidentEvery = 100 * time.Millisecond

// defaultMmapPages is -m's default: 16 MiB per CPU.
const defaultMmapPages = 4096

// recordOptions are record's parsed flags.
type recordOptions struct {
	output   string
	pid      int
	all      bool
	duration time.Duration
	quiet    bool
	verbose  bool
	cmd      []string

	recordMethod
	recordStacks
	recordRings
	recordMemory
	recordFiles
	recordWindows
}

// recordMethod: how allocator calls are seen (--method and its options).
type recordMethod struct {
	method    string
	probes    []string // allocator functions, canonical names
	libc      string
	shimWait  time.Duration
	shimClock string
	attach    string // -p: attachUprobe or attachInject
}

// recordStacks: which events carry stacks.
type recordStacks struct {
	stackSize   int
	stackMin    uint64
	stackEvery  uint64
	faultStacks bool
}

// recordRings: the kernel's rings; mmapPagesSet, stackPagesSet: -m,
// --stack-mmap-pages were given (else the in-process method lowers them).
type recordRings struct {
	mmapPages, stackPages       int
	mmapPagesSet, stackPagesSet bool
}

// recordMemory: what record does to and reads of the program's memory:
// THP, the memory-map calls, the page-table snapshots (residentEvery,
// noExitSnapshots).
type recordMemory struct {
	noTHP           bool
	noMapCalls      bool
	perCall         bool
	residentEvery   time.Duration
	noExitSnapshots bool
}

// recordFiles: what record writes besides the recording's events.
type recordFiles struct {
	compress        bool
	noCompress      bool
	noBuildIDCache  bool
	buildIDCacheMax int // MB
	cpuProfile      string
}

func runRecord(env *Env, args []string) error {
	o, err := parseRecordFlags(env, args)
	if err != nil || o == nil {
		return recordStatus(err)
	}
	if o.cpuProfile != "" {
		// A Go CPU profile of record itself, until it returns.
		out, err := os.Create(o.cpuProfile)
		if err != nil {
			return recordStatus(err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			return recordStatus(err)
		}
		defer pprof.StopCPUProfile()
	}
	// record's heap is mostly buffers it keeps to the end (the output
	// pipeline's chunks, the encoders' tables, the rings' bookkeeping)
	// and its per-record work allocates nothing: collecting each time
	// the heap doubled (GOGC 100) stops the world several times while
	// those buffers grow at the start (docs/performance.md).
	gc := recordGCPercent
	if o.every > 0 {
		// A run of hours keeps its heap near what it holds (the live
		// allocations' state, the stacks and sites seen), not five
		// times it: a collection when the heap has grown by half.
		gc = windowGCPercent
	}
	defer debug.SetGCPercent(debug.SetGCPercent(gc))
	r := &recorder{sys: realSystem{}, env: env, opts: o, group: rec.ProbeGroup(os.Getpid())}
	return recordStatus(r.run())
}

// recordGCPercent is record's GOGC: a collection when the heap has grown
// to five times what the last one kept.
const recordGCPercent = 400

// windowGCPercent is record's GOGC with --every.
const windowGCPercent = 50

// cmdStatus is an exit status that belongs to CMD, not to record: CMD's
// own, or 126/127 for a CMD that cannot run.
type cmdStatus struct {
	code int
	err  error
}

func (e *cmdStatus) Error() string { return e.err.Error() }

// recordStatus gives record's exit status the convention of env, nice and
// timeout (POSIX's 126/127 for commands that cannot run): CMD's status
// passes through, and every failure of record's own, whatever its code
// inside record, exits ExitRecordFailed.
func recordStatus(err error) error {
	if err == nil {
		return nil
	}
	var cs *cmdStatus
	if errors.As(err, &cs) {
		return &ExitError{Code: cs.code, Err: cs.err}
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return &ExitError{Code: ExitRecordFailed, Err: ee.Err}
	}
	return &ExitError{Code: ExitRecordFailed, Err: err}
}

func parseRecordFlags(env *Env, args []string) (*recordOptions, error) {
	o := &recordOptions{}
	var probes []string
	fs := newFlagSet("record")
	fs.StringVarP(&o.output, "output", "o", "faultline.data", "write the recording to `FILE` (- for standard output)")
	fs.IntVarP(&o.pid, "pid", "p", 0, "record the running process `PID` and its threads (its libc from /proc/PID/maps)")
	fs.BoolVarP(&o.all, "all-cpus", "a", false, "record every process (system-wide)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after `D` (e.g. 30s, 2m); CMD is then sent SIGINT; without it -p and -a run until Ctrl-C and CMD until it exits")
	fs.StringSliceVar(&probes, "probe", []string{"all"}, "probe only the allocator functions in `LIST`, comma-separated, of malloc, calloc, realloc, reallocarray, free, memalign, aligned_alloc, posix_memalign, valloc, pvalloc, an allocator family's own (op_new, mallocx, tc_new, mi_zalloc, ...), or all (malloc is always probed; calloc as __libc_calloc; a family's own only where the allocator is of that family)")
	fs.IntVar(&o.stackSize, "stack-size", 0, fmt.Sprintf("the user stack `BYTES` a stack sample carries, at most 65528: in-process the shim copies from the stack pointer to the top of the thread's stack, at most this (default %d); the kernel's stack samples (--method uprobe, --fault-stacks) always copy this many (default %d); smaller is cheaper but may not reach the root frame", defaultStackCap, defaultKernelStackSize))
	fs.Uint64Var(&o.stackMin, "stack-min", 4096, "every allocation of at least `BYTES` gets a stack")
	fs.Uint64Var(&o.stackEvery, "stack-every", defaultStackEvery, "1 in `N` smaller allocations gets a stack (1 = all: costly)")
	fs.BoolVar(&o.faultStacks, "fault-stacks", false, "also take a stack at 1 in --stack-every page faults (for analyze --by touch)")
	fs.BoolVar(&o.noMapCalls, "no-map-calls", false, "do not record the memory-map calls (mmap, munmap, mremap, madvise, brk; in-process the shim records them, with uprobes the syscall tracepoints): without them analyze sees no releases, no re-faults, and the program's own mappings stay [anon]")
	fs.IntVarP(&o.mmapPages, "mmap-pages", "m", defaultMmapPages, "ring buffer per CPU for calls and faults, in `N` pages (a power of two; 4096 = 16 MiB); the in-process method, whose calls bypass it, takes 1024 unless given")
	fs.IntVar(&o.stackPages, "stack-mmap-pages", 1024, "ring buffer per CPU for stacks, in `N` pages (a power of two); the in-process method takes 512 unless given")
	fs.BoolVarP(&o.compress, "compress", "z", true, "compress the recording with zstd (as perf -z; perf 6.1 reads it): about 20 times smaller, the default")
	fs.BoolVar(&o.noCompress, "no-compress", false, "write the records uncompressed (for tools that cannot read perf -z files)")
	fs.BoolVar(&o.noTHP, "no-thp", false, "disable transparent huge pages for CMD (PR_SET_THP_DISABLE), so that every page arrives by a fault of its own; by default the program keeps the system's setting; no effect on a running process (-p)")
	fs.DurationVar(&o.residentEvery, "resident-every", defaultResidentEvery, "read each process's resident memory from its page tables this often while it runs (0: only as each process exits)")
	fs.BoolVar(&o.noExitSnapshots, "no-exit-snapshots", false, "do not stop each process at exit_group to read its resident memory (a seccomp filter does that; programs that install a seccomp notifier of their own need this)")
	fs.StringVar(&o.libc, "libc", "", "probe the allocator in `PATH` (a library, or a program that links one) instead of the one malloc binds to (implies --method uprobe)")
	fs.DurationVar(&o.shimWait, "shim-wait", 10*time.Second, "in-process: the longest a thread waits for room in its ring before the program runs on unrecorded")
	fs.MarkHidden("shim-wait")
	fs.BoolVar(&o.perCall, "per-call-samples", false, "in-process: write each allocator call as a perf sample of its own, not each thread's calls packed into faultline:packed samples that analyze and script expand (about five times the bytes before compression; for tools that read perf.data but not faultline:packed)")
	fs.StringVar(&o.shimClock, "shim-clock", "auto", "in-process: how the shim stamps calls: `C` = tsc (the CPU's time-stamp counter, converted to CLOCK_MONOTONIC), monotonic (clock_gettime for every call), or auto (tsc where the kernel's clock is read from a constant-rate TSC)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a Go CPU profile of record itself to `FILE`")
	fs.MarkHidden("cpuprofile")
	fs.StringVar(&o.attach, "attach", attachInject, "with -p, how record reaches the running process: `A` = inject (ptrace makes the process load the shim, which records in-process, no trap per call, and is undone when record ends; where it cannot — a static program, ptrace denied, seccomp — record says why in one line and uses uprobes), or uprobe (a uprobe on every allocator call, a trap each)")
	fs.StringVar(&o.method, "method", methodAuto, "how allocator calls are recorded: `M` = inproc (a shim preloaded into CMD: no trap per call), uprobe (a uprobe on every call: works for -p, -a and static or setuid programs, costs a trap per call), or auto (inproc where CMD can be preloaded)")
	fs.BoolVar(&o.noBuildIDCache, "no-buildid-cache", false, "do not copy the recorded binaries into perf's build-id cache (~/.debug of the user who ran sudo, or $PERF_BUILDID_DIR), which lets analyze name frames after they are rebuilt or upgraded")
	fs.IntVar(&o.buildIDCacheMax, "buildid-cache-max", defaultBuildIDCacheMax, "copy at most `MB` of binaries into the build-id cache per recording; the rest are skipped with a note")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print only errors (CMD's failure among them): no summary, no warnings")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "also print details that need no action (allocator functions that are aliases of another, probed once)")
	fs.DurationVar(&o.every, "every", 0, "cut the recording into windows of `D` (e.g. 60s) and write, as each ends, its profile (faults, allocations and bytes per site in the window, resident memory per site at its end) into the folder -o names (default "+defaultWindowDir+"), or push it with --push; no recording file is kept")
	o.push = addPushFlags(fs, "push", "push-label", "push-timeout")
	// Flags after CMD belong to CMD.
	fs.SetInterspersed(false)
	if done, err := parseFlags(env, fs, recordHelp, args); done {
		return nil, err
	}
	o.cmd = fs.Args()
	o.mmapPagesSet = fs.Changed("mmap-pages")
	o.stackPagesSet = fs.Changed("stack-mmap-pages")
	if o.noCompress {
		o.compress = false
	}
	switch {
	case o.pid < 0:
		return nil, usageError("record: -p wants a process id, got %d", o.pid)
	case o.pid > 0 && o.all:
		return nil, usageError("record: -p and -a exclude each other")
	case o.pid > 0 && len(o.cmd) > 0:
		return nil, usageError("record: give either -p PID or a command, not both")
	case o.pid == 0 && !o.all && len(o.cmd) == 0:
		return nil, usageError("record: nothing to record: give a command after --, -p PID or -a; run 'faultline record --help'")
	case o.duration < 0:
		return nil, usageError("record: --duration must be positive")
	case fs.Changed("stack-size") && (o.stackSize < 8 || o.stackSize > 65528 || o.stackSize%8 != 0):
		return nil, usageError("record: --stack-size %d: want a multiple of 8 between 8 and 65528 (the kernel's limit)", o.stackSize)
	case o.stackEvery == 0:
		return nil, usageError("record: --stack-every wants 1 or more")
	case o.mmapPages <= 0 || o.mmapPages&(o.mmapPages-1) != 0:
		return nil, usageError("record: --mmap-pages %d: want a power of two such as 4096 or 8192", o.mmapPages)
	case o.stackPages <= 0 || o.stackPages&(o.stackPages-1) != 0:
		return nil, usageError("record: --stack-mmap-pages %d: want a power of two such as 1024", o.stackPages)
	case o.output == "":
		return nil, usageError("record: -o wants a file name")
	case o.attach != attachUprobe && o.attach != attachInject:
		return nil, usageError("record: --attach %q: want uprobe or inject", o.attach)
	case o.method != methodAuto && o.method != methodInproc && o.method != methodUprobes:
		return nil, usageError("record: --method %q: want inproc, uprobe or auto", o.method)
	case o.shimClock != "auto" && o.shimClock != "tsc" && o.shimClock != "monotonic":
		return nil, usageError("record: --shim-clock %q: want tsc, monotonic or auto", o.shimClock)
	case o.buildIDCacheMax < 0:
		return nil, usageError("record: --buildid-cache-max wants 0 or more MB")
	}
	if err := o.parseWindows(fs.Changed("output")); err != nil {
		return nil, err
	}
	var err error
	if o.probes, err = rec.CanonicalProbes(probes); err != nil {
		return nil, usageError("record: --probe: %v", err)
	}
	return o, nil
}

// system is the outside world record reaches (rec.System); tests
// substitute a fake.
type system = rec.System

// realSystem is the machine itself.
type realSystem = rec.OS

// recorder runs one recording.
type recorder struct {
	sys  system
	env  *Env
	opts *recordOptions

	group string          // this run's probe group, rec.ProbeGroup
	alloc *libc.Allocator // CMD's allocator, once found
	win   *windowRun      // --every's analysis
	notes notes           // warnings, written once at the end unless -q
}

// prereqError is a missing prerequisite, with the fix in the message
// (record exits ExitRecordFailed for it: recordStatus).
func prereqError(format string, args ...any) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: "+format, args...)}
}

func (r *recorder) logf(format string, args ...any) {
	if !r.opts.quiet {
		fmt.Fprintf(r.env.Stderr, "faultline: "+format+"\n", args...)
	}
}

// run records and then writes the warnings gathered on the way, after the
// probes are gone; under -q only the error, if any, is printed.
func (r *recorder) run() error {
	err := r.record()
	if !r.opts.quiet {
		r.notes.write(r.env.Stderr, r.opts.verbose)
	}
	return err
}

func (r *recorder) record() error {
	o := r.opts
	var cmdPath string
	if len(o.cmd) > 0 {
		p, err := libc.ResolveCommand(r.sys, o.cmd[0])
		if err != nil {
			return &cmdStatus{code: ExitNotFound, err: fmt.Errorf("record: %v", err)}
		}
		if err := r.checkExecutable(p); err != nil {
			return &cmdStatus{code: ExitCannotExecute, err: fmt.Errorf("record: cannot execute %s: %v", p, err)}
		}
		cmdPath = p
	}
	refused := false // --attach inject could not: record said why
	if o.pid > 0 && o.attach == attachInject && o.method != methodUprobes && o.libc == "" {
		done, err := r.recordAttached()
		if done {
			return err
		}
		refused = true
	}
	method, why, err := r.chooseMethod(cmdPath)
	if err != nil {
		return err
	}
	if refused || (o.pid > 0 && o.attach == attachUprobe) {
		why = "" // said, or asked for
	}
	if method == methodInproc {
		return r.recordInproc(cmdPath)
	}
	if why != "" && o.method == methodAuto {
		r.logf("recording with uprobes: %s", why)
	}
	if err := r.checkPrivileges(); err != nil {
		return err
	}
	tfs, err := r.openTracefs()
	if err != nil {
		return err
	}
	lib, probes, err := r.allocatorProbes(cmdPath)
	if err != nil {
		return err
	}

	// From here on probes may exist: catch signals first so Ctrl-C while
	// adding them still removes them.
	sigs, stop := r.catchSignals()
	defer stop()
	sigs, exit := r.watchPid(sigs)
	defer exit.stop()

	if err := r.removeStale(tfs); err != nil {
		return err
	}
	up, err := tfs.AddUprobes(probes)
	if err != nil {
		return prereqError("%v", err)
	}
	closeProbes := func() {
		if up != nil {
			r.notes.add(up.Close())
			up = nil
		}
	}
	defer closeProbes()
	if lib != "" {
		r.logf("probing %d functions of %s as %s:*", countEntries(probes), r.describeAllocator(lib), r.group)
	}
	select {
	case s := <-sigs:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: interrupted by %v before recording started", s)}
	default:
	}

	out, err := r.createOutput()
	if err != nil {
		return err
	}
	defer out.Discard()
	cfg := &rec.Config{
		Source: up.Source(r.group), MapCalls: r.mapCallEvents(),
		Target: rec.Target{Pid: o.pid, All: o.all, NoTHP: o.noTHP, Duration: o.duration + r.windowTail(),
			Signals: sigs, Following: r.following, Stdin: r.env.Stdin, Stdout: r.env.Stdout, Stderr: r.env.Stderr},
		StackOptions:    r.stackOptions(),
		RingOptions:     rec.RingOptions{RangePages: o.mmapPages, StackPages: o.stackPages},
		SnapshotOptions: rec.SnapshotOptions{ResidentEvery: o.residentEvery, ExitSnapshots: !o.noExitSnapshots},
		OutputOptions: rec.OutputOptions{Pipe: out.Stdout, Compress: o.compress,
			Cmdline: append([]string{"faultline", "record"}, os.Args[min(2, len(os.Args)):]...)},
	}
	if out.Stdout && r.win == nil {
		cfg.Stdout = r.env.Stderr // standard output carries the recording
	}
	if len(o.cmd) > 0 {
		cfg.Cmd, cfg.Argv = cmdPath, o.cmd
	}
	if o.noTHP && o.pid > 0 && r.thpEnabled() {
		r.logf("note: transparent huge pages stay on for a running process; one fault may map 2 MiB")
	}
	if o.pid > 0 {
		r.noteNamespaces(o.pid)
	}
	if o.pid > 0 || o.all {
		if o.duration == 0 {
			r.logf("recording; press Ctrl-C to stop")
		}
	}
	res, err := rec.Record(cfg, out.W)
	if werr := r.endWindows(err); werr != nil {
		return werr
	}
	if err != nil {
		if e := openEventsError(err, r.paranoid(), nofileLimit()); e != nil {
			return e
		}
		if errors.Is(err, syscall.ENOSPC) {
			err = fmt.Errorf("%w; the partial recording was removed: free space there or choose another -o", err)
		}
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: %v", err)}
	}
	if missing := up.Missing(); len(missing) > 0 {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: this run's probes were removed while it recorded (%s): the recording misses their calls; was another tool clearing %s/uprobe_events? Run again", strings.Join(missing, ", "), tfs.Dir())}
	}
	closeProbes()
	if err := out.Commit(); err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: %v", err)}
	}
	r.cacheBuildIDs(res)
	if lib != "" {
		r.noteNoAllocations(res, lib)
	}
	r.summarize(res, out)
	exit.say(r, res)
	r.noteRest(res)
	return r.exitStatus(res)
}

// noteNoAllocations says, in one line, why a recording with faults holds
// no allocator call, and what to do: lib is the object probed.
func (r *recorder) noteNoAllocations(res *rec.Result, lib string) {
	var faults, calls uint64
	for _, e := range res.Events {
		switch {
		case e.Stack:
		case isFaultEvent(e.Name):
			faults += e.Samples
		default:
			calls += e.Samples
		}
	}
	// A program that never allocates (true) faults only what its loader
	// touches; analyze.EmptyMinPages is the bound on anonymous memory,
	// which record cannot tell from the rest, so all faults count here.
	if faults < analyze.EmptyMinPages || calls > 0 {
		return
	}
	if r.opts.libc != "" && len(r.opts.cmd) > 0 {
		if p, err := libc.ResolveCommand(r.sys, r.opts.cmd[0]); err == nil {
			if a, err := libc.FindAllocator(r.sys, p, r.sys.Getenv("LD_PRELOAD")); err == nil && a.Path != lib {
				r.notes.add(fmt.Errorf("%d faults but no allocator call recorded: malloc in this program is %s; this recording probed %s; record again without --libc", faults, a, lib))
				return
			}
		}
	}
	r.notes.add(fmt.Errorf("%d faults but no allocator call recorded: the program never called the malloc of %s (an allocator linked in and stripped, or memory only from mmap?); name the allocator's library with --libc", faults, r.describeAllocator(lib)))
}

// isFaultEvent reports whether a recorded event is a page-fault event.
func isFaultEvent(name string) bool {
	for _, p := range []string{"page-faults", "minor-faults", "major-faults", "exceptions:page_fault_user"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// catchSignals routes SIGINT, SIGTERM and SIGHUP (a closed terminal) to
// the recording, which ends with the file finished, and turns SIGPIPE into
// EPIPE errors: a closed stderr (| head) must not kill record before its
// cleanup. (signal.Ignore would be inherited by CMD.)
func (r *recorder) catchSignals() (<-chan os.Signal, func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	return sigs, func() {
		signal.Stop(sigs)
		signal.Stop(pipes)
	}
}

func countEntries(probes []rec.UprobeDef) int {
	n := 0
	for _, p := range probes {
		if !strings.HasSuffix(p.Event, "__return") {
			n++
		}
	}
	return n
}

// exitStatus turns CMD's end into record's exit status. CMD stopped by
// record when --duration elapsed ended as asked: 0.
func (r *recorder) exitStatus(res *rec.Result) error {
	if !res.Ran || res.Unfinished || res.StoppedBy == rec.StoppedByDuration {
		return nil
	}
	name := filepath.Base(r.opts.cmd[0])
	if res.Signal != 0 {
		return &cmdStatus{code: 128 + int(res.Signal), err: fmt.Errorf("%s was killed by signal %d (%v); exit status %d; the recording is complete", name, int(res.Signal), unix.SignalName(res.Signal), 128+int(res.Signal))}
	}
	if res.ExitCode != 0 {
		return &cmdStatus{code: res.ExitCode, err: fmt.Errorf("%s exited with status %d; the recording is complete", name, res.ExitCode)}
	}
	return nil
}

// checkExecutable refuses what execve(2) would refuse, before any probe
// is added (rec.CheckExecutable).
func (r *recorder) checkExecutable(path string) error { return rec.CheckExecutable(r.sys, path) }

func (r *recorder) checkPrivileges() error {
	if err := rec.CheckUprobePrivileges(r.sys); err != nil {
		return prereqError("%v. Run: sudo faultline record ...", err)
	}
	return nil
}

// paranoid is /proc/sys/kernel/perf_event_paranoid's value, or "unknown".
func (r *recorder) paranoid() string { return rec.Paranoid(r.sys) }

// openTracefs finds tracefs, or mounts it and says so.
func (r *recorder) openTracefs() (*rec.Tracefs, error) {
	t, mounted, err := rec.OpenTracefs(r.sys)
	if err != nil {
		return nil, prereqError("%v", err)
	}
	if mounted {
		r.logf("mounted tracefs at %s (left mounted)", t.Dir())
	}
	return t, nil
}

// removeStale removes the probes of runs that were killed before they
// could remove their own (rec.Tracefs.RemoveStale) and says which.
func (r *recorder) removeStale(t *rec.Tracefs) error {
	stale, err := t.RemoveStale()
	for _, g := range stale {
		for _, ev := range g.Busy {
			r.logf("stale probe %s:%s is in use; left alone", g.Group, ev)
		}
		if len(g.Removed) > 0 {
			r.logf("removed the probes of %s, left by a run that was killed (%s)", g.Group, strings.Join(g.Removed, ", "))
		}
	}
	if err != nil {
		return prereqError("%v", err)
	}
	return nil
}

// findLibc returns the object whose allocator record probes
// (rec.FindAllocator), and keeps the allocator found.
func (r *recorder) findLibc(cmdPath string) (string, error) {
	lib, a, err := rec.FindAllocator(r.sys, rec.AllocatorRequest{Libc: r.opts.libc, Pid: r.opts.pid, Cmd: cmdPath})
	if err != nil {
		return "", prereqError("%v", err)
	}
	if a != nil {
		r.alloc = a
	}
	return lib, nil
}

// allocator finds (once) the allocator the program at path binds malloc
// to, with the environment CMD inherits from record.
func (r *recorder) allocator(path string) (*libc.Allocator, error) {
	if r.alloc == nil {
		_, a, err := rec.FindAllocator(r.sys, rec.AllocatorRequest{Cmd: path, Pid: r.opts.pid})
		if err != nil {
			return nil, err
		}
		r.alloc = a
	}
	return r.alloc, nil
}

func (r *recorder) thpEnabled() bool { return rec.THPEnabled(r.sys) }

// shellQuote renders args for a log line a user can paste.
func shellQuote(args []string) string {
	var out []string
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}

// summarize prints samples and losses per event, what CMD cost, and the
// next command; overflowed rings become warnings. Under -q nothing.
func (r *recorder) summarize(res *rec.Result, out *outputFile) {
	o := r.opts
	w := r.env.Stderr
	if res.RangeLost > 0 {
		r.notes.add(fmt.Errorf("the call and fault rings overflowed: %d records lost (PERF_RECORD_LOST); raise -m (now %d, try %d)", res.RangeLost, o.mmapPages, o.mmapPages*4))
	}
	if res.Unreadable > 0 {
		r.notes.add(fmt.Errorf("%d bytes of the kernel's ring buffers did not read as records and were skipped: the records in them are missing from the recording; record again, and report it if it recurs", res.Unreadable))
	}
	if res.StackLost > 0 {
		r.notes.add(fmt.Errorf("the stack rings overflowed: %d stack samples lost (calls are all kept); raise --stack-mmap-pages (now %d) or --stack-every (now %d)", res.StackLost, o.stackPages, o.stackEvery))
	}
	if o.quiet {
		return
	}
	name := o.output
	if out.Stdout {
		name = "standard output"
	}
	if r.win != nil {
		fmt.Fprintf(w, "faultline: %s (%.1f MB of records analyzed", r.win.summary(), float64(res.DataBytes)/1e6)
	} else {
		fmt.Fprintf(w, "faultline: wrote %s (%.1f MB", name, float64(res.FileBytes)/1e6)
	}
	if o.compress {
		fmt.Fprintf(w, ", %.1f MB uncompressed", float64(res.DataBytes)/1e6)
		if res.KeptRaw > 0 && res.DataBytes > 0 {
			// Compression never holds the program up: what it could
			// not keep up with went to the file as it was.
			fmt.Fprintf(w, "; %.0f%% stored uncompressed to keep up", 100*float64(res.KeptRaw)/float64(res.DataBytes))
		}
	}
	fmt.Fprintln(w, ")")
	writeLossTable(w, res.Events)
	if res.TwinsRepaired+res.TwinsDropped > 0 {
		fmt.Fprintf(w, "faultline: note: the kernel gave %d samples to the wrong one of two instances of an event (a shared perf_sample_data in software events); repaired\n", res.TwinsRepaired+res.TwinsDropped)
	}
	if res.Ran {
		// Probe hits (uprobes: entries and returns, each a trap), or
		// calls (in-process: a return is part of its call).
		var hits uint64
		for _, e := range res.Events {
			if !e.Stack && !isFaultEvent(e.Name) && (res.Method != "in-process" || !strings.HasSuffix(e.Name, "__return")) {
				hits += e.Samples
			}
		}
		cost := ""
		switch s := res.Wall.Seconds(); {
		case s <= 0 || hits == 0:
		case len(res.Rest.Procs) > 0: // calls of processes that ran on after it
			cost = fmt.Sprintf(" with %d allocator calls recorded, its own and those of the processes it left", hits)
		case res.Method == "in-process":
			cost = fmt.Sprintf(" with %d allocator calls recorded in-process (%.0f/s, no trap per call)", hits, float64(hits)/s)
		default:
			cost = fmt.Sprintf(" with %d probe hits (%.0f/s); each hit is a trap into the kernel, charged to the program as CPU time: compare with its run time without record for the slowdown", hits, float64(hits)/s)
		}
		fmt.Fprintf(w, "faultline: %s ran %.3f s (user %.3f s, sys %.3f s)%s\n",
			filepath.Base(o.cmd[0]), res.Wall.Seconds(), res.User.Seconds(), res.Sys.Seconds(), cost)
		if sn := res.Snapshots; sn.Periodic+sn.Exits > 0 {
			fmt.Fprintf(w, "faultline: read the page tables %d times while it ran and %d at exits (its processes stopped there %.1f ms in all): %.1f ms of CPU\n",
				sn.Periodic, sn.Exits, float64(sn.Held)/1e6, float64(sn.Cost)/1e6)
		}
		if sn := res.Snapshots; sn.Unread > 0 {
			fmt.Fprintf(w, "faultline: %d exits went unread: record did not read the process within %v (it was stopped or starved of CPU), so its guard let it exit; processes held at exit %.1f ms in all\n",
				sn.Unread, launch.ExitWait, float64(sn.Held)/1e6)
		}
		if res.StoppedBy == rec.StoppedByDuration {
			fmt.Fprintf(w, "faultline: record stopped %s after --duration %v (SIGINT, as asked): %s; exit status 0\n",
				filepath.Base(o.cmd[0]), o.duration, howStopped(res))
		}
	}
	if !out.Stdout && out.Special == "" {
		fmt.Fprintf(w, "Next: faultline analyze %s -o faults.pb.gz && go tool pprof -top faults.pb.gz\n", shellQuote([]string{o.output}))
	}
}

// howStopped says how CMD ended after record asked it to stop.
func howStopped(res *rec.Result) string {
	switch {
	case res.Unfinished:
		return "it did not exit in the grace time and was killed"
	case res.Signal != 0:
		return fmt.Sprintf("it was killed by %v", unix.SignalName(res.Signal))
	default:
		return fmt.Sprintf("it exited with status %d", res.ExitCode)
	}
}

// writeLossTable prints one row per event: samples, and lost samples as the
// kernel counted them per event (perf report --stats' LOST_SAMPLES), under
// the names faultline info and perf script show.
func writeLossTable(w io.Writer, events []rec.EventCount) {
	width := len("event")
	for _, e := range events {
		width = max(width, len(e.Name))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tsamples\tlost\t\n", width, "event")
	quiet := 0
	for _, e := range events {
		if e.Samples == 0 && e.Lost == 0 {
			quiet++ // a function the program never called
			continue
		}
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t\n", width, e.Name, strconv.FormatUint(e.Samples, 10), strconv.FormatUint(e.Lost, 10))
	}
	tw.Flush()
	if quiet > 0 {
		fmt.Fprintf(w, "  (%d more events recorded nothing; faultline info lists them all)\n", quiet)
	}
}
