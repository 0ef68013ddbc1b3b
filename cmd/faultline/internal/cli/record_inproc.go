package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"github.com/faultline/faultline/perfdata/schema"
)

// Recording methods (--method).
const (
	methodAuto    = rec.MethodAuto
	methodInproc  = rec.MethodInProcess
	methodUprobes = rec.MethodUprobes
)

// Shared-memory rings of the in-process method: one per thread of the
// program alive at once (a thread that finds none runs unrecorded, and
// the summary says so), each of shimRingBytes, touched only as threads
// claim them.
const (
	shimRingBytes = 2 << 20
	shimSlots     = shim.MaxSlots
)

// unprivilegedPages is the kernel ring size per CPU for a user who is not
// root: 512 KiB, what perf_event_mlock_kb allows by default.
const unprivilegedPages = 128

// inprocPages and inprocStackPages are the kernel's rings per CPU for the
// in-process method, which carry only the faults and the memory-map calls
// (the allocator calls go through the shim's rings): 4 MiB and 2 MiB. A
// fault sample is about 64 bytes, so the ring holds some 60000 faults
// between two drains (5 ms apart at the most); a bigger ring costs every
// recording the time the kernel takes to allocate and map it.
const (
	inprocPages      = 1024
	inprocStackPages = 512
)

// chooseMethod picks the recording method for this run, and says why
// (rec.ChooseMethod); a method asked for that cannot record the target is
// a usage error.
func (r *recorder) chooseMethod(cmdPath string) (method, why string, err error) {
	o := r.opts
	method, why, err = rec.ChooseMethod(r.sys, rec.MethodRequest{Method: o.method, Cmd: cmdPath, Pid: o.pid, All: o.all, Libc: o.libc})
	if err != nil {
		return "", "", usageError("record: %v", err)
	}
	return method, why, nil
}

// stackOptions are the recording's stack options, from the flags: without
// --stack-size the shim's cap and the kernel's copy have defaults of their
// own (defaultStackCap, defaultKernelStackSize), with it both are its.
func (r *recorder) stackOptions() rec.StackOptions {
	o := r.opts
	so := rec.StackOptions{StackMin: o.stackMin, StackEvery: o.stackEvery, StackSize: uint32(o.stackSize), FaultStacks: o.faultStacks}
	if o.stackSize == 0 {
		so.StackSize, so.KernelStackSize = defaultStackCap, defaultKernelStackSize
	}
	return so
}

// describeAllocator names the allocator in lib for record's log.
func (r *recorder) describeAllocator(lib string) string {
	if r.alloc != nil && r.alloc.Path == lib {
		return r.alloc.String()
	}
	return lib
}

// How record reaches a running process (--attach).
const (
	attachUprobe = "uprobe"
	attachInject = "inject"
)

// recordAttached records -p's process in-process, the shim injected
// (rec.AttachSource). done is false when the process cannot be attached
// to: record has said why in one line, changed nothing, and records it
// with uprobes.
func (r *recorder) recordAttached() (done bool, err error) {
	refused := func(reason string) (bool, error) {
		r.logf("cannot attach in-process (%s): recording with uprobes", reason)
		return false, nil
	}
	if err := rec.CheckAttach(r.opts.pid); err != nil {
		if reason, ok := rec.IsRefused(err); ok {
			return refused(reason)
		}
		return true, &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: %v", err)}
	}
	err = r.recordInproc("")
	if reason, ok := rec.IsRefused(err); ok {
		return refused(reason)
	}
	return true, err
}

// recordInproc records CMD with the allocator shim preloaded, or with -p
// the running process with the shim injected: no probes, no tracefs; the
// kernel's events are its page faults and its mappings.
func (r *recorder) recordInproc(cmdPath string) error {
	o := r.opts
	if !o.stackPagesSet {
		o.stackPages = inprocStackPages
	}
	if !o.mmapPagesSet {
		o.mmapPages = inprocPages
		if r.sys.Geteuid() != 0 {
			// The kernel's ring holds only faults and mappings here; a
			// user may lock perf_event_mlock_kb (516 KiB by default) per
			// CPU.
			o.mmapPages = unprivilegedPages
			r.notes.add(&detailNote{fmt.Errorf("not root: the kernel's ring per CPU is %d pages (perf_event_mlock_kb); faults are lost if they outrun it (record says so): run as root for %d", o.mmapPages, inprocPages)})
		}
	}
	sigs, stop := r.catchSignals()
	defer stop()
	sigs, exit := r.watchPid(sigs)
	defer exit.stop()
	out, err := r.createOutput()
	if err != nil {
		return err
	}
	defer out.Discard()
	alloc := "the C library's malloc"
	a, aerr := r.allocator(cmdPath) // sets r.alloc
	if aerr == nil {
		alloc = a.String()
	}
	src := &rec.InProcessSource{RingBytes: shimRingBytes, Slots: shimSlots, Glibc: r.alloc == nil || r.alloc.Family.HasChunkHeader(),
		TopWords: rec.TopStackWords, Wait: o.shimWait,
		// The shim records the memory-map calls: no tracefs.
		MapCalls: !o.noMapCalls, PerCall: o.perCall}
	cfg := &rec.Config{
		Source: src,
		Target: rec.Target{Cmd: cmdPath, Argv: o.cmd, NoTHP: o.noTHP, Duration: o.duration + r.windowTail(),
			Signals: sigs, Following: r.following, Stdin: r.env.Stdin, Stdout: r.env.Stdout, Stderr: r.env.Stderr},
		StackOptions:    r.stackOptions(),
		RingOptions:     rec.RingOptions{RangePages: o.mmapPages, StackPages: o.stackPages},
		SnapshotOptions: rec.SnapshotOptions{ResidentEvery: o.residentEvery, ExitSnapshots: !o.noExitSnapshots},
		OutputOptions: rec.OutputOptions{Pipe: out.Stdout, Compress: o.compress,
			Cmdline: append([]string{"faultline", "record"}, os.Args[min(2, len(os.Args)):]...)},
	}
	if r.alloc != nil {
		src.Family = r.alloc.Family
	}
	what := shellQuote(o.cmd[:min(1, len(o.cmd))])
	if o.pid > 0 {
		cfg.Source = &rec.AttachSource{InProcessSource: *src}
		cfg.Target = rec.Target{Pid: o.pid, Duration: o.duration + r.windowTail(), Signals: sigs, Following: r.following,
			Stdin: r.env.Stdin, Stdout: r.env.Stdout, Stderr: r.env.Stderr}
		cfg.SnapshotOptions.ExitSnapshots = false
		what = fmt.Sprintf("process %d", o.pid)
		if o.duration == 0 {
			r.logf("recording; press Ctrl-C to stop")
		}
	}
	if out.Stdout && r.win == nil {
		cfg.Stdout = r.env.Stderr // standard output carries the recording
	}
	why := "as asked (--shim-clock)"
	switch o.shimClock {
	case "tsc":
		src.TSC = true
	case "auto":
		src.TSC, why = shim.TSCUsable()
	}
	if src.TSC {
		r.notes.add(&detailNote{errors.New("the shim stamps calls from the CPU's time-stamp counter, converted to CLOCK_MONOTONIC")})
	} else {
		r.notes.add(&detailNote{fmt.Errorf("the shim stamps calls with clock_gettime: %s", why)})
	}
	if o.pid > 0 {
		// Said before the attach, which may yet fall back to uprobes
		// (recordAttached says so).
		r.logf("attaching to %s in-process: the calls of its allocator, %s, through a shim injected until record ends, its page faults with perf events", what, alloc)
	} else {
		r.logf("recording %s in-process: the calls of its allocator, %s, through a preloaded shim, its page faults with perf events", what, alloc)
	}
	res, err := rec.Record(cfg, out.W)
	if werr := r.endWindows(err); werr != nil {
		return werr
	}
	if err != nil {
		if e := inprocEventsError(err, r.paranoid(), nofileLimit()); e != nil {
			return e
		}
		if _, ok := rec.IsRefused(err); ok {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: %v", err)}
	}
	if o.pid > 0 {
		r.noteNamespaces(o.pid) // once attached: a refusal records with uprobes, which say it
	}
	if err := out.Commit(); err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: %v", err)}
	}
	r.cacheBuildIDs(res)
	r.noteShim(res)
	r.summarize(res, out)
	exit.say(r, res)
	r.noteRest(res)
	return r.exitStatus(res)
}

// noteShim turns what the shim could not record into warnings.
func (r *recorder) noteShim(res *rec.Result) {
	if res.Abandoned {
		r.notes.add(fmt.Errorf("the program waited for the recorder longer than it may (--shim-wait, %v: a ring stayed full), so it ran on unrecorded from %.3f s into the run: %d allocator calls after that are missing (written as lost samples); %s", r.opts.shimWait, float64(res.AbandonedAt-min(res.AbandonedAt, res.FirstTime))/1e9, res.Shim.Unrecorded, stallCause(res.Stalls, r.opts.output)))
	}
	if res.Shim.SlotsFull > 0 {
		r.notes.add(fmt.Errorf("%d threads found no free ring (more than %d threads alive at once) and ran unrecorded: %d allocator calls missed", res.Shim.SlotsFull, shimSlots, res.Shim.Unrecorded))
	}
	if res.Shim.Interrupted > 0 {
		r.notes.add(fmt.Errorf("%d allocator calls came while the shim was recording another call of the same thread's state and were not recorded (written as lost samples): a signal handler that interrupted it, or a thread started by a raw clone/clone3 without its own TLS (CLONE_SETTLS), which shares its parent's; --method uprobe records them", res.Shim.Interrupted))
	}
	if os.Getenv("FAULTLINE_DEBUG_SHIM") != "" {
		r.logf("debug: shim %+v late %d shimfaults %d", res.Shim, res.Late, res.ShimFaults)
	}
	if res.TSCJumps > 0 {
		r.notes.add(fmt.Errorf("the CPU's time-stamp counter disagreed with CLOCK_MONOTONIC %d times, first %.3f s into the run; from then on the shim read CLOCK_MONOTONIC, and calls up to 20 µs before may be stamped off by the difference (record with --shim-clock=monotonic to leave the counter alone)", res.TSCJumps, float64(res.TSCJumpAt-min(res.TSCJumpAt, res.FirstTime))/1e9))
	}
	if res.Late > 0 {
		r.notes.add(fmt.Errorf("%d records were written after newer ones (a thread stalled between its clock read and its write); analyze may misorder them", res.Late))
	}
	if n := res.Unshimmed; len(n) > 0 {
		r.notes.add(fmt.Errorf("%s ran without the shim, so their allocator calls are not in the recording (their page faults are): each set its own LD_PRELOAD, cleared its environment, or is static or set-uid; record such a program with --method uprobe (as root)", unshimmedLine(n)))
	}
	if n := res.Detached; len(n) > 0 {
		r.notes.add(fmt.Errorf("%s loaded the shim but could not reach record's rings, so their allocator calls are not in the recording (their page faults are): privileges dropped before the exec (the rings are reachable by record's user only); record such a program with --method uprobe (as root)", unshimmedLine(n)))
	}
}

// stallCause says why record kept the program waiting, from what it saw
// of itself, and what to do about it.
func stallCause(st rec.Stalls, output string) string {
	switch {
	case st.WriteBlocked >= 100*time.Millisecond:
		dest := output
		if output == "-" {
			dest = "standard output"
		}
		return fmt.Sprintf("the cause: writing the recording to %s blocked for up to %.1f s (its reader did not keep up); write to a file (-o FILE) and copy it afterwards, or speed up the reader", dest, st.WriteBlocked.Seconds())
	case st.Stopped:
		return fmt.Sprintf("the cause: record was stopped (SIGSTOP, Ctrl-Z) for up to %.1f s; do not stop it while it records", st.Paused.Seconds())
	case st.Paused >= 100*time.Millisecond:
		return fmt.Sprintf("the cause: record did not run for up to %.1f s (starved of CPU, or its machine paused); give it a CPU of its own, or a longer --shim-wait", st.Paused.Seconds())
	}
	return "record kept running and its output kept up: raise --shim-wait"
}

// unshimmedLine names the programs that ran without the shim.
func unshimmedLine(procs []schema.ExecProcess) string {
	return fmt.Sprintf("%d %s (%s)", len(procs), plural(len(procs), "program", "programs"), schema.NameProcesses(procs))
}
