package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
	"github.com/spf13/pflag"
)

// analyzeForDiff analyzes a perf.data recording with analyze's defaults,
// quietly, to the profile diff compares.
func analyzeForDiff(env *Env, path string, cfg symbolize.Config) (*profile.Profile, error) {
	res, err := analyzeFile(env, path, defaultAnalyzeOptions(), cfg, true)
	if err != nil {
		return nil, err
	}
	return res.Profile, nil
}

const analyzeHelp = `Usage: faultline analyze [flags] FILE|-

Reads a perf.data recording of malloc's calls (entry with the size, return
with the pointer: faultline record's events, or perf's uprobes) and page faults with their data addresses, unwinds
every stack from its DWARF stack copy, joins each fault to the live allocation
whose bytes it touched (per process: fork and exec aware) and writes a gzipped
pprof profile:

  sample types  faults (default), allocs, alloc_space (bytes), resident_peak
                (bytes of anonymous memory each site held when the total
                peaked) and resident_end (at exit); releases are seen when
                the memory-map calls were recorded (faultline record does;
                perf: -e 'syscalls:sys_enter_munmap' and the rest,
                docs/recording.md); where faultline record read the page
                tables (faultline:resident) the figures are set to them at
                each read; untouched (bytes allocated never resident while
                the allocation lived) and huge (bytes of resident_peak in
                huge pages)
  stacks        --by alloc: the allocation's call stack from its site: the
                leaf is the first frame in your own code (see below), so
                go tool pprof -top lists the summary's sites; the library
                function it went through is label via (via=std::vector::
                push_back); --raw-sites keeps the raw leaf, the code that
                called malloc; --by touch: the faulting code's stack (label
                alloc_site names the allocation's caller); faults have stacks
                only when recorded with them (faultline record --fault-stacks)
  labels        flag=fast|mmap|zero, comm, thread (TID NAME), access=read|
                write|exec (tracepoint faults), inside=allocator (faults the
                allocator took on its own heap or arena memory while serving
                the call, charged to it), class=[stack]|[heap]|[anon]|
                [file] NAME|[unknown] for faults that touched no allocation
                (their leaf names the class); stack=sampled|inferred|leaf in
                recordings whose allocator entries carry stacks for some
                calls only (faultline record); via (above), via=mmap for
                memory the program mapped itself (its mmap call is the
                site); refault=yes for faults on pages released before
  names         as pprof shows them (app::Store::fill, no parameters or
                template arguments); the full name is the SystemName
  comments      one line with every event's samples and lost samples
                (LOST_SAMPLES, as perf report --stats): go tool pprof
                -comments; diff warns on them

A fault malloc takes while serving a call counts for that call's allocation
when it touches the new chunk or the header written right after it (small
allocations fault fresh heap pages there), or the heap or an arena.

The summary names each site by its first frame in your own code, skipping
system libraries and code inlined from system headers (libstdc++'s
std::vector internals), and says which library function it went through;
--raw-sites shows the leaf instead, in the summary and the profile.

Recordings of faultline record: allocator calls and faults come without
stacks, and the entry probe again with a stack for every big allocation and
a sample of the others. A call without a stack gets its exact leaf (the
address malloc returned to, inline frames included) and, where stacks were
sampled at that same leaf in the same program (comm), callers split over
them in proportion (stack=inferred); the summary says how much was
inferred.

A recording of several programs (a shell pipeline, a build): --comm NAME
and --pid PID analyze only some of them; the summary's Selected line says
which processes that kept and what it ignored.

A summary goes to standard output (to standard error with -o -, so that
standard output carries only the profile). FILE "-" reads a pipe-mode
recording from standard input: perf record -o - ... | faultline analyze -

Record with 'faultline record -- CMD', or by hand:

  perf probe -x $LIBC 'malloc size=%di:u64'
  perf probe -x $LIBC 'malloc%return ptr=$retval'
  perf record -c 1 -d --call-graph dwarf -e probe_libc:malloc \
      -e probe_libc:malloc__return -e page-faults:u -- ./prog

Example (a recording shipped with faultline; no root or perf needed):

  faultline analyze --symfs testdata/symfs testdata/perf/basic.plain.data -o faults.pb.gz
  go tool pprof -top faults.pb.gz
  go tool pprof -top -tagfocus=flag=mmap faults.pb.gz

Flags:
`

type analyzeFlags struct {
	out, by             string
	quiet, verbose      bool
	fastMax, mmapThresh uint64
	window              time.Duration
	maxLive             int
	events              []string
	comms               []string
	pids                []uint
	sym                 *symbolizeFlags
	jobs                int
	cpuProfile          string
	memProfile          string
	execTrace           string
	rawSites            bool
	push                *pushFlags
}

func defaultAnalyzeOptions() analyze.Options {
	return analyze.Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc}
}

func runAnalyze(env *Env, args []string) error {
	def := defaultAnalyzeOptions()
	f := &analyzeFlags{}
	fs := f.flagSet(def)
	if done, err := parseFlags(env, fs, analyzeHelp, args); done {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("analyze: want one recording (FILE or - for stdin); see 'faultline analyze --help'")
	}
	labels, err := f.push.parse("analyze")
	if err != nil {
		return err
	}
	opts, err := f.options(def)
	if err != nil {
		return err
	}
	start := time.Now()
	// The CPU profile and the execution trace each write their file until
	// analyze returns.
	for _, rec := range []struct {
		path  string
		start func(io.Writer) error
		stop  func()
	}{{f.cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile}, {f.execTrace, trace.Start, trace.Stop}} {
		if rec.path == "" {
			continue
		}
		out, err := os.Create(rec.path)
		if err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		defer out.Close()
		if err := rec.start(out); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		defer rec.stop()
	}
	var nt notes
	if f.memProfile != "" {
		opts.Done = func() {
			if err := writeHeapProfile(f.memProfile); err != nil {
				nt.add(err)
			}
		}
	}
	res, err := analyzeFile(env, fs.Arg(0), opts, f.sym.config(), f.quiet)
	if err != nil {
		return err
	}
	addUnattributedComment(res)
	if err := writeProfile(env, f.out, res.Profile); err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	pushed := ""
	if f.push.url != "" {
		var raw bytes.Buffer
		if err := res.Profile.Write(&raw); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		if pushed, err = f.push.push(raw.Bytes(), res.Profile, labels); err != nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("analyze: wrote %s, but %v", f.out, err)}
		}
	}
	if !f.quiet {
		w := summaryWriter(env, f.out)
		fmt.Fprintf(w, "faultline: analyzed %s in %.2fs; wrote %s\n", fs.Arg(0), time.Since(start).Seconds(), f.out)
		if pushed != "" {
			fmt.Fprintf(w, "faultline: %s\n", pushed)
		}
		fmt.Fprintln(w)
		res.Summary.WriteText(w)
		fmt.Fprintf(w, "\nNext: go tool pprof -top %s   (or -http=: for a flame graph)\n", f.out)
	}
	// A profile with faults and no allocation is not an answer: say why
	// and fail, once (not also as a warning).
	var empty error
	var warnings []error
	for _, w := range res.Summary.Warnings {
		if errors.Is(w, analyze.ErrNoAllocations) || errors.Is(w, analyze.ErrNothingAttributed) {
			empty = w
			continue
		}
		warnings = append(warnings, w)
	}
	if !f.quiet {
		nt.add(warnings...)
		nt.drop(res.Summary.WarningsDropped)
		nt.write(env.Stderr, f.verbose)
	}
	if empty != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("analyze: wrote %s, but %w", f.out, empty)}
	}
	return nil
}

// flagSet defines analyze's flags, with def's values as defaults, into f.
func (f *analyzeFlags) flagSet(def analyze.Options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("analyze", pflag.ContinueOnError)
	fs.StringVarP(&f.out, "output", "o", "faults.pb.gz", "write the profile to `FILE` (- for standard output; the summary then goes to standard error)")
	fs.StringVar(&f.by, "by", "alloc", "whose stack a fault sample carries: alloc (the allocation's) or touch (the faulting code's)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no summary, no progress bar, no warnings: only errors on standard error")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "print every warning in full (where debug info was looked for, ...)")
	fs.Uint64Var(&f.fastMax, "fast-max", def.Attr.FastMax, "flag allocations of at most `BYTES` as fast")
	fs.Uint64Var(&f.mmapThresh, "mmap-threshold", def.Attr.MmapThreshold, "size from which an allocation counts as mmap'd when the recording cannot tell (`BYTES`)")
	fs.DurationVar(&f.window, "window", time.Duration(def.Attr.Window), "without a return probe, attribute faults to the thread's allocation this recent")
	fs.IntVar(&f.maxLive, "max-live", def.Attr.MaxLive, "track at most `N` live allocations (0: no limit); past it new allocations are counted but not tracked, their faults unattributed, and the summary says how many")
	fs.BoolVar(&f.rawSites, "raw-sites", false, "keep each allocation's leaf frame (e.g. std::vector::_M_realloc_insert vector.tcc:453) as the profile's leaf and the summary's site name, instead of its first frame in your own code (app::Store::fill app.cpp:31, label via=std::vector::push_back)")
	fs.StringArrayVar(&f.events, "event", nil, "give an event a role: `NAME=ROLE`, ROLE one of malloc, calloc, realloc, memalign (or ROLE-return), free, fault, ignore (repeatable)")
	fs.StringArrayVar(&f.comms, "comm", nil, "only the samples of programs named `NAME` (process or thread name, as perf report --comm; after an exec the new program's); repeatable")
	fs.UintSliceVar(&f.pids, "pid", nil, "only the samples of process `PID` (repeatable, or comma-separated); with --comm too, a sample must match both")
	fs.IntVarP(&f.jobs, "jobs", "j", 0, "unwind stacks on `N` goroutines beside the decoding one (0: one per CPU, GOMAXPROCS; 1: everything on one); the profile is the same for any N")
	f.sym = addSymbolizeFlags(fs)
	f.push = addPushFlags(fs, "push", "push-label", "push-timeout")
	// For profiling faultline itself (testdata/bench/bench.sh).
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the analysis to `FILE`")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a Go heap profile, taken at the end of the analysis, to `FILE`")
	fs.StringVar(&f.execTrace, "trace", "", "write a Go execution trace of the analysis to `FILE` (go tool trace: which stage keeps a core idle)")
	fs.MarkHidden("cpuprofile")
	fs.MarkHidden("trace")
	fs.MarkHidden("memprofile")
	return fs
}

// options turns the parsed flags into the analysis's options.
func (f *analyzeFlags) options(def analyze.Options) (analyze.Options, error) {
	opts := def
	switch f.by {
	case "alloc":
		opts.Mode = report.ByAlloc
	case "touch":
		opts.Mode = report.ByTouch
	default:
		return opts, usageError("analyze: --by %q: want alloc or touch", f.by)
	}
	opts.RawSites = f.rawSites
	opts.Attr.FastMax = f.fastMax
	opts.Attr.MmapThreshold = f.mmapThresh
	opts.Attr.Window = uint64(f.window)
	if f.maxLive < 0 {
		return opts, usageError("analyze: --max-live %d: want 0 (no limit) or a positive count", f.maxLive)
	}
	opts.Attr.MaxLive = f.maxLive
	if f.jobs < 0 {
		return opts, usageError("analyze: --jobs %d: want 0 (one per CPU) or a positive count", f.jobs)
	}
	opts.Workers = f.jobs
	opts.Comms = f.comms
	for _, p := range f.pids {
		if p == 0 || p > math.MaxUint32 {
			return opts, usageError("analyze: --pid %d: want a process id", p)
		}
		opts.Pids = append(opts.Pids, uint32(p))
	}
	if len(f.events) > 0 {
		opts.Events = map[string]string{}
		for _, e := range f.events {
			name, role, ok := strings.Cut(e, "=")
			if !ok {
				return opts, usageError("analyze: --event %q: want NAME=ROLE", e)
			}
			opts.Events[name] = role
		}
	}
	return opts, nil
}

// analyzeFile runs the analysis on a file or on stdin ("-").
func analyzeFile(env *Env, name string, opts analyze.Options, cfg symbolize.Config, quiet bool) (*analyze.Result, error) {
	r, err := openRecording(env, name, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cfg.DebuginfodProgress = debuginfodProgress(env, quiet)
	if fi, err := os.Stat(name); name != "-" && err == nil && fi.Mode().IsRegular() {
		cfg.InputBytes = fi.Size()
	}
	sess, err := symbolize.NewSession(cfg, r.Meta())
	if err != nil {
		return nil, &ExitError{Code: ExitFailure, Err: err}
	}
	defer sess.Close()
	var done func()
	opts.Progress, done = newProgress(env, name, quiet, "analyzing")
	res, err := analyze.Run(r, sess, opts)
	done()
	if err != nil {
		return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: %w", displayName(name), err)}
	}
	return res, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC() // up-to-date statistics
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func displayName(name string) string {
	if name == "-" {
		return "standard input"
	}
	return name
}

// writeProfile writes p gzipped to path, or to the command's standard
// output for "-"; an error closing the file (a full disk) is an error.
func writeProfile(env *Env, path string, p *profile.Profile) error {
	if path == "-" {
		if err := p.Write(env.Stdout); err != nil {
			return fmt.Errorf("writing the profile to standard output: %w", err)
		}
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// addUnattributedComment puts the warning of a recording whose faults
// mostly land on memory no recorded allocation covers, with what to do,
// into the profile's comments, where pprof shows it atop every view.
func addUnattributedComment(res *analyze.Result) {
	for _, w := range res.Summary.Warnings {
		var u *analyze.UnattributedError
		if errors.As(w, &u) {
			res.Profile.Comments = append(res.Profile.Comments, "faultline: "+withAdvice(u))
		}
	}
}
