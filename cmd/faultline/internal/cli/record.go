package cli

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/libc"
	"github.com/faultline/faultline/perfdata"
	"golang.org/x/sys/unix"
)

const recordHelp = `Usage: faultline record [flags] [--] CMD [ARGS...]
       faultline record [flags] -p PID [--duration D]
       faultline record [flags] -a [--duration D] [-- CMD [ARGS...]]

Records what 'faultline analyze' needs: uprobes on libc's malloc (entry and
return) and every user page fault, each with a DWARF stack. record does the
setup perf leaves to you:

  - checks that perf runs and that we are root (adding uprobes writes
    /sys/kernel/tracing/uprobe_events, which only root may do);
  - mounts tracefs at /sys/kernel/tracing when it is not mounted (and leaves
    it mounted);
  - finds the libc the target really loads: CMD's ELF dependencies (PATH,
    RUNPATH, LD_LIBRARY_PATH, the ld.so cache), or /proc/PID/maps for -p;
  - adds its probes in its own group, faultline:*, so probes of yours (say
    probe_libc:malloc) are never touched, and always removes them again, also
    on Ctrl-C and on errors; probes left by a killed earlier run are
    recreated;
  - disables transparent huge pages for CMD (see --no-thp);
  - runs perf record, then prints how many samples each event lost;
  - under sudo, hands the recording to the user who ran sudo, so analyze
    needs no root.

Flags after CMD belong to CMD. Only malloc is probed unless --probe adds more:
calloc, realloc and the aligned allocators do not call malloc in glibc, so
their allocations are invisible without it. Every sample copies --stack-size
bytes of stack (8 KiB by default): compress with -z.

Exit status: 0 the recording was written (also when CMD failed or Ctrl-C
stopped it); 2 a missing prerequisite, bad usage or perf failed.

Example:

  sudo faultline record -z -o sort.data -- sort -o /dev/null big.txt
  faultline analyze sort.data -o faults.pb.gz
  go tool pprof -top faults.pb.gz

  # a running server for 30 seconds, with calloc and realloc too
  sudo faultline record --probe calloc,realloc -p "$(pidof myserver)" --duration 30s

Flags:
`

// probeGroup is the tracefs group of every probe record adds. Nothing
// outside this group is ever added or removed.
const probeGroup = "faultline"

// recordOptions are record's parsed flags.
type recordOptions struct {
	output    string
	pid       int
	all       bool
	duration  time.Duration
	probes    []string // extra allocator functions, canonical names
	stackSize int
	mmapPages int
	compress  bool
	noTHP     bool
	libc      string
	perf      string
	quiet     bool
	cmd       []string
}

func runRecord(env *Env, args []string) error {
	o, err := parseRecordFlags(env, args)
	if err != nil || o == nil {
		return err
	}
	r := &recorder{sys: realSystem{}, env: env, opts: o}
	return r.run()
}

func parseRecordFlags(env *Env, args []string) (*recordOptions, error) {
	o := &recordOptions{}
	var probes []string
	fs := newFlagSet("record")
	fs.StringVarP(&o.output, "output", "o", "faultline.data", "write the recording to `FILE`")
	fs.IntVarP(&o.pid, "pid", "p", 0, "record the running process `PID` (its libc from /proc/PID/maps)")
	fs.BoolVarP(&o.all, "all-cpus", "a", false, "record every process (system-wide)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after `D` (e.g. 30s, 2m); without it -p and -a run until Ctrl-C and CMD until it exits")
	fs.StringSliceVar(&probes, "probe", nil, "also probe the allocator functions in `LIST`, comma-separated: calloc, realloc, free, memalign, aligned_alloc, posix_memalign, valloc, pvalloc, or all (malloc is always probed; calloc as __libc_calloc)")
	fs.IntVar(&o.stackSize, "stack-size", 8192, "user stack `BYTES` copied per sample, at most 65528; smaller loses fewer samples but unwinds less deep")
	fs.IntVarP(&o.mmapPages, "mmap-pages", "m", 1024, "perf's ring buffer per CPU, in `N` pages (a power of two; 1024 = 4 MiB); raise it when samples are lost")
	fs.BoolVarP(&o.compress, "compress", "z", false, "compress the recording with zstd (perf -z: ~100x smaller, a little more CPU while recording)")
	fs.BoolVar(&o.noTHP, "no-thp", true, "disable transparent huge pages for CMD (--no-thp=false keeps them): with THP one fault can map 2 MiB, so fault counts stop meaning pages; no effect on a running process (-p)")
	fs.StringVar(&o.libc, "libc", "", "probe the C library at `PATH` instead of the one found")
	fs.StringVar(&o.perf, "perf", "", "run the perf binary at `PATH` (default: perf from $PATH)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print only errors and the final summary")
	// Flags after CMD belong to CMD.
	fs.SetInterspersed(false)
	if done, err := parseFlags(env, fs, recordHelp, args); done {
		return nil, err
	}
	o.cmd = fs.Args()
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
	case o.stackSize < 8 || o.stackSize > 65528 || o.stackSize%8 != 0:
		return nil, usageError("record: --stack-size %d: want a multiple of 8 between 8 and 65528 (perf's limit)", o.stackSize)
	case o.mmapPages <= 0 || o.mmapPages&(o.mmapPages-1) != 0:
		return nil, usageError("record: --mmap-pages %d: want a power of two such as 1024 or 4096", o.mmapPages)
	case o.output == "":
		return nil, usageError("record: -o wants a file name")
	}
	var err error
	if o.probes, err = canonicalProbes(probes); err != nil {
		return nil, usageError("record: --probe: %v", err)
	}
	return o, nil
}

// allocFunc is an allocator function record can probe.
type allocFunc struct {
	name    string   // event name in the faultline group
	symbols []string // libc symbols to try, in order
	// entry lists the entry arguments by position; ret says whether the
	// return probe records the pointer (ptr, hdr) or only a status (ret).
	entry []string
	ret   string // "ptr", "status" or "" (no return probe)
}

// allocFuncs are the probe-able functions. calloc is probed as
// __libc_calloc: `perf probe -x libc calloc` attached twice on glibc 2.36
// (NOTES.md); we resolve the symbol ourselves, but keep the real name so
// the probe is on the function itself.
var allocFuncs = []allocFunc{
	{name: "malloc", symbols: []string{"malloc", "__libc_malloc"}, entry: []string{"size"}, ret: "ptr"},
	{name: "calloc", symbols: []string{"__libc_calloc", "calloc"}, entry: []string{"nmemb", "size"}, ret: "ptr"},
	{name: "realloc", symbols: []string{"realloc", "__libc_realloc"}, entry: []string{"ptr", "size"}, ret: "ptr"},
	{name: "free", symbols: []string{"free", "__libc_free"}, entry: []string{"ptr"}},
	{name: "memalign", symbols: []string{"memalign", "__libc_memalign"}, entry: []string{"alignment", "size"}, ret: "ptr"},
	{name: "aligned_alloc", symbols: []string{"aligned_alloc"}, entry: []string{"alignment", "size"}, ret: "ptr"},
	{name: "posix_memalign", symbols: []string{"posix_memalign", "__posix_memalign"}, entry: []string{"memptr", "alignment", "size"}, ret: "status"},
	{name: "valloc", symbols: []string{"valloc", "__libc_valloc"}, entry: []string{"size"}, ret: "ptr"},
	{name: "pvalloc", symbols: []string{"pvalloc", "__libc_pvalloc"}, entry: []string{"size"}, ret: "ptr"},
}

func lookupAllocFunc(name string) *allocFunc {
	for i := range allocFuncs {
		if allocFuncs[i].name == name {
			return &allocFuncs[i]
		}
	}
	return nil
}

// canonicalProbes validates --probe values, expands "all", drops malloc
// (always probed) and duplicates, and keeps allocFuncs order.
func canonicalProbes(in []string) ([]string, error) {
	want := map[string]bool{}
	for _, p := range in {
		p = strings.TrimSpace(p)
		switch {
		case p == "" || p == "malloc":
		case p == "all":
			for _, f := range allocFuncs {
				want[f.name] = true
			}
		case p == "__libc_calloc":
			want["calloc"] = true
		case lookupAllocFunc(p) != nil:
			want[p] = true
		default:
			var names []string
			for _, f := range allocFuncs[1:] {
				names = append(names, f.name)
			}
			return nil, fmt.Errorf("unknown function %q (want %s or all)", p, strings.Join(names, ", "))
		}
	}
	var out []string
	for _, f := range allocFuncs[1:] {
		if want[f.name] {
			out = append(out, f.name)
		}
	}
	return out, nil
}

// system is the outside world record reaches; tests substitute a fake.
// libc.System holds the file and command access (LookPath, Run, ReadFile,
// Open, Exists, Inode, Getenv).
type system interface {
	libc.System
	// AppendLine writes line to path in one write(2), as tracefs control
	// files want.
	AppendLine(path, line string) error
	Geteuid() int
	MountTracefs(dir string) error
	Chown(path string, uid, gid int) error
}

type realSystem struct{}

func (realSystem) LookPath(file string) (string, error) { return exec.LookPath(file) }

func (realSystem) Run(name string, args ...string) ([]byte, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	c := exec.CommandContext(ctx, name, args...)
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	return out.Bytes(), errb.Bytes(), err
}

func (realSystem) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

func (realSystem) Open(path string) (libc.File, error) { return os.Open(path) }

func (realSystem) AppendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(line + "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (realSystem) Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (realSystem) Inode(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no inode", path)
	}
	return st.Ino, nil
}

func (realSystem) Geteuid() int { return os.Geteuid() }

func (realSystem) MountTracefs(dir string) error {
	return unix.Mount("nodev", dir, "tracefs", 0, "")
}

func (realSystem) Getenv(key string) string { return os.Getenv(key) }

func (realSystem) Chown(path string, uid, gid int) error { return os.Chown(path, uid, gid) }

// recorder runs one recording.
type recorder struct {
	sys  system
	env  *Env
	opts *recordOptions

	perfPath    string
	perfVersion string
	tracefs     string // directory holding uprobe_events
	added       []string
}

// prereqError is a missing prerequisite: exit 2 with the fix in the message.
func prereqError(format string, args ...any) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: "+format, args...)}
}

func (r *recorder) logf(format string, args ...any) {
	if !r.opts.quiet {
		fmt.Fprintf(r.env.Stderr, "faultline: "+format+"\n", args...)
	}
}

func (r *recorder) run() error {
	if err := r.checkPerf(); err != nil {
		return err
	}
	if err := r.checkPrivileges(); err != nil {
		return err
	}
	if err := r.ensureTracefs(); err != nil {
		return err
	}
	lib, err := r.findLibc()
	if err != nil {
		return err
	}
	probes, notes, err := probeDefinitions(r.sys, lib, r.opts.probes)
	if err != nil {
		return prereqError("%v", err)
	}
	for _, n := range notes {
		r.logf("%s", n)
	}

	// From here on probes may exist: catch signals first so Ctrl-C while
	// adding them still removes them.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// A closed stderr (| head) must not kill us before cleanup: with
	// SIGPIPE notified, writes fail with EPIPE instead. (signal.Ignore
	// would be inherited by perf and CMD.)
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)

	if err := r.removeStale(); err != nil {
		return err
	}
	defer r.removeProbes()
	if err := r.addProbes(probes); err != nil {
		return err
	}
	r.logf("probing %s in %s (perf %s)", eventList(probes), lib, r.perfVersion)
	select {
	case s := <-sigs:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: interrupted by %v before recording started", s)}
	default:
	}
	if err := r.perfRecord(probes, sigs); err != nil {
		return err
	}
	r.removeProbes()
	r.giveToInvoker()
	r.summarize()
	return nil
}

// giveToInvoker hands the recording to the user who ran sudo. perf writes
// it as root with mode 0600, so 'faultline analyze' run without sudo
// afterwards (as the CI recipe does) could not read it.
func (r *recorder) giveToInvoker() {
	uid, err := strconv.Atoi(r.sys.Getenv("SUDO_UID"))
	if err != nil || uid == 0 || r.sys.Geteuid() != 0 {
		return
	}
	gid, err := strconv.Atoi(r.sys.Getenv("SUDO_GID"))
	if err != nil {
		gid = -1 // leave the group
	}
	if err := r.sys.Chown(r.opts.output, uid, gid); err != nil {
		fmt.Fprintf(r.env.Stderr, "faultline: warning: could not give %s to the sudo user (uid %d): %v; read it with sudo\n", r.opts.output, uid, err)
	}
}

func eventList(probes []probeDef) string {
	var names []string
	for _, p := range probes {
		names = append(names, probeGroup+":"+p.event)
	}
	return strings.Join(names, ", ")
}

// perfVersionRE matches `perf version` output such as "perf version 6.1.187".
var perfVersionRE = regexp.MustCompile(`perf version (\d+)\.(\d+)\S*`)

func (r *recorder) checkPerf() error {
	name := r.opts.perf
	if name == "" {
		name = "perf"
	}
	path, err := r.sys.LookPath(name)
	if err != nil {
		return prereqError("perf not found (%v): install it (Debian/Ubuntu: apt-get install linux-perf, or linux-tools-$(uname -r) on Ubuntu; Fedora: dnf install perf), or name it with --perf", err)
	}
	out, errOut, err := r.sys.Run(path, "version")
	if err != nil {
		// Debian's /usr/bin/perf is a wrapper that fails when no perf for the
		// running kernel is installed; its message says which package.
		msg := strings.TrimSpace(string(errOut) + " " + string(out))
		return prereqError("%s does not run (%v): %s; install the perf that matches your kernel (Debian: apt-get install linux-perf)", path, err, oneLine(msg))
	}
	m := perfVersionRE.FindSubmatch(out)
	if m == nil {
		return prereqError("%s: cannot read its version from %q; is it Linux perf?", path, oneLine(string(out)))
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	r.perfPath, r.perfVersion = path, strings.TrimPrefix(string(m[0]), "perf version ")
	// Per-event terms (/call-graph=no/) need 4.x; -z needs 5.5.
	if major < 4 {
		return prereqError("perf %s is too old: record needs perf 4.0 or newer", r.perfVersion)
	}
	if r.opts.compress && (major < 5 || major == 5 && minor < 5) {
		return prereqError("perf %s cannot compress (-z needs perf 5.5 or newer); drop --compress", r.perfVersion)
	}
	return nil
}

// oneLine joins a multi-line message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (r *recorder) checkPrivileges() error {
	if r.sys.Geteuid() == 0 {
		return nil
	}
	paranoid := "unknown"
	if b, err := r.sys.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err == nil {
		paranoid = strings.TrimSpace(string(b))
	}
	return prereqError("must run as root: adding uprobes writes /sys/kernel/tracing/uprobe_events, which only root may do (perf_event_paranoid is %s; a non-root perf would also need it at -1 or CAP_PERFMON). Run: sudo faultline record ...", paranoid)
}

// tracefsDirs are where tracefs is found, the preferred mount point first.
var tracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

func (r *recorder) ensureTracefs() error {
	for _, d := range tracefsDirs {
		if r.sys.Exists(filepath.Join(d, "uprobe_events")) {
			r.tracefs = d
			return nil
		}
	}
	dir := tracefsDirs[0]
	if err := r.sys.MountTracefs(dir); err != nil {
		return prereqError("tracefs is not mounted and mounting it failed (%v); run: mount -t tracefs nodev %s", err, dir)
	}
	r.logf("mounted tracefs at %s (left mounted)", dir)
	if !r.sys.Exists(filepath.Join(dir, "uprobe_events")) {
		return prereqError("%s has no uprobe_events: the kernel lacks uprobe events (CONFIG_UPROBE_EVENTS=y); use a kernel built with it", dir)
	}
	r.tracefs = dir
	return nil
}

// findLibc returns the libc the target loads.
func (r *recorder) findLibc() (string, error) {
	if r.opts.libc != "" {
		if !r.sys.Exists(r.opts.libc) {
			return "", prereqError("--libc %s: no such file", r.opts.libc)
		}
		return r.opts.libc, nil
	}
	if r.opts.pid > 0 {
		lib, err := libc.ForProcess(r.sys, r.opts.pid)
		if err != nil {
			return "", prereqError("%v", err)
		}
		return lib, nil
	}
	target := "/bin/sh" // -a without a command: the system's libc
	if len(r.opts.cmd) > 0 {
		target = r.opts.cmd[0]
	}
	path, err := libc.ResolveCommand(r.sys, target)
	if err != nil {
		return "", prereqError("%v", err)
	}
	lib, err := libc.ForBinary(r.sys, path)
	if err != nil {
		return "", prereqError("%v", err)
	}
	return lib, nil
}

// probeDef is one uprobe: its event name in the faultline group, the line
// written to uprobe_events, and whether its samples carry a stack.
type probeDef struct {
	event string
	line  string
	stack bool
}

// argRegs are the registers holding the first integer arguments, in the
// kernel's fetch-arg spelling, per libc machine.
var argRegs = map[elf.Machine][]string{
	elf.EM_X86_64:  {"%di", "%si", "%dx"},
	elf.EM_AARCH64: {"%x0", "%x1", "%x2"},
}

// probeDefinitions builds the uprobe_events lines for malloc and the extra
// functions in libc at path. We write uprobe_events ourselves instead of
// running perf probe: perf 6.1's perf probe refuses an event name that
// exists in any group ("event \"malloc\" already exists" when the user
// has probe_libc:malloc), and a resolved file offset attaches once where
// perf probe's debuginfo lookup attached calloc twice. Functions that are
// aliases of one already probed (aligned_alloc is memalign in glibc 2.36)
// are probed once; notes say so.
func probeDefinitions(sys libc.System, path string, extra []string) (defs []probeDef, notes []string, err error) {
	lib, err := libc.Open(sys, path)
	if err != nil {
		return nil, nil, err
	}
	regs, ok := argRegs[lib.Machine]
	if !ok {
		return nil, nil, fmt.Errorf("%s is for %v; record knows the argument registers of x86-64 and arm64 only", path, lib.Machine)
	}
	byOffset := map[uint64]string{}
	for _, name := range append([]string{"malloc"}, extra...) {
		fn := lookupAllocFunc(name)
		off, _, ok := lib.Offset(fn.symbols...)
		if !ok {
			if name == "malloc" {
				return nil, nil, fmt.Errorf("%s has no malloc symbol; is it a C library?", path)
			}
			notes = append(notes, fmt.Sprintf("%s has no %s; not probing it", path, name))
			continue
		}
		if prev, dup := byOffset[off]; dup {
			notes = append(notes, fmt.Sprintf("%s is the same function as %s in %s; probed once, as %s:%s", name, prev, path, probeGroup, prev))
			continue
		}
		byOffset[off] = name
		loc := fmt.Sprintf("%s:%#x", path, off)
		var args []string
		for i, a := range fn.entry {
			args = append(args, fmt.Sprintf("%s=%s:u64", a, regs[i]))
		}
		defs = append(defs, probeDef{
			event: fn.name,
			line:  fmt.Sprintf("p:%s/%s %s %s", probeGroup, fn.name, loc, strings.Join(args, " ")),
			// free's stack says nothing about the allocation.
			stack: fn.name != "free",
		})
		switch fn.ret {
		case "ptr":
			// hdr is the malloc chunk header in front of the pointer: its
			// size and IS_MMAPPED bit (NOTES.md).
			defs = append(defs, probeDef{event: fn.name + "__return",
				line: fmt.Sprintf("r:%s/%s__return %s ptr=$retval hdr=-8($retval):u64", probeGroup, fn.name, loc)})
		case "status":
			defs = append(defs, probeDef{event: fn.name + "__return",
				line: fmt.Sprintf("r:%s/%s__return %s ret=$retval:s32", probeGroup, fn.name, loc)})
		}
	}
	return defs, notes, nil
}

// removeStale removes faultline:* probes left by an earlier run that was
// killed before it could clean up. Probes of other groups are not touched.
// A probe in use (another faultline record running) cannot be removed and
// stops us.
func (r *recorder) removeStale() error {
	events := filepath.Join(r.tracefs, "uprobe_events")
	data, err := r.sys.ReadFile(events)
	if err != nil {
		return prereqError("reading %s: %v", events, err)
	}
	stale := groupProbes(string(data), probeGroup)
	if len(stale) == 0 {
		return nil
	}
	for _, ev := range stale {
		if err := r.sys.AppendLine(events, "-:"+probeGroup+"/"+ev); err != nil {
			if errors.Is(err, syscall.EBUSY) {
				return prereqError("probe %s:%s is in use: is another 'faultline record' running? Wait for it, or stop it and run again", probeGroup, ev)
			}
			return prereqError("removing stale probe %s:%s: %v", probeGroup, ev, err)
		}
	}
	r.logf("removed %d stale %s:* probes left by an earlier run (%s); recreating them", len(stale), probeGroup, strings.Join(stale, ", "))
	return nil
}

// groupProbes lists the events of group in uprobe_events text, whose lines
// read "p:GROUP/EVENT PATH:OFFSET ARGS" or "r:GROUP/EVENT ...".
func groupProbes(uprobeEvents, group string) []string {
	var out []string
	for _, line := range strings.Split(uprobeEvents, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		_, name, ok := strings.Cut(f[0], ":")
		if !ok {
			continue
		}
		g, ev, ok := strings.Cut(name, "/")
		if ok && g == group {
			out = append(out, ev)
		}
	}
	return out
}

func (r *recorder) addProbes(probes []probeDef) error {
	events := filepath.Join(r.tracefs, "uprobe_events")
	for _, p := range probes {
		if err := r.sys.AppendLine(events, p.line); err != nil {
			return prereqError("adding probe %s:%s (%q to %s): %v", probeGroup, p.event, p.line, events, err)
		}
		r.added = append(r.added, p.event)
	}
	return nil
}

// removeProbes removes the probes this run added, newest first. It runs
// again harmlessly from the deferred call.
func (r *recorder) removeProbes() {
	events := filepath.Join(r.tracefs, "uprobe_events")
	for i := len(r.added) - 1; i >= 0; i-- {
		ev := r.added[i]
		var err error
		// perf's exit releases the events; allow the kernel a moment.
		for try := 0; try < 20; try++ {
			if err = r.sys.AppendLine(events, "-:"+probeGroup+"/"+ev); !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			fmt.Fprintf(r.env.Stderr, "faultline: warning: could not remove probe %s:%s: %v; remove it with: perf probe -d %s:%s\n", probeGroup, ev, err, probeGroup, ev)
		}
	}
	r.added = nil
}

// perfRecordArgs builds perf record's command line.
func perfRecordArgs(o *recordOptions, probes []probeDef) []string {
	args := []string{"record",
		"-c", "1", // every event, not a frequency's sample of them
		"-d", // PERF_SAMPLE_ADDR: the faulting address
		"--call-graph", "dwarf," + strconv.Itoa(o.stackSize),
		"-m", strconv.Itoa(o.mmapPages),
	}
	for _, p := range probes {
		ev := probeGroup + ":" + p.event
		if !p.stack {
			ev += "/call-graph=no/"
		}
		args = append(args, "-e", ev)
	}
	args = append(args, "-e", "page-faults:u", "-o", o.output)
	if o.compress {
		args = append(args, "-z")
	}
	switch {
	case o.pid > 0:
		args = append(args, "-p", strconv.Itoa(o.pid))
	case o.all:
		args = append(args, "-a")
	}
	if len(o.cmd) > 0 {
		args = append(args, "--")
		args = append(args, o.cmd...)
	}
	return args
}

// setTHPDisabled sets PR_SET_THP_DISABLE on this process and returns the
// previous setting. The flag lives in the mm, is copied on fork and kept
// across exec, so perf's child — the process that execs CMD — starts with
// it; no launcher process is needed. We restore ours once perf started.
func setTHPDisabled(on bool) (prev bool, err error) {
	old, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0)
	if err != nil {
		return false, err
	}
	v := uintptr(0)
	if on {
		v = 1
	}
	return old != 0, unix.Prctl(unix.PR_SET_THP_DISABLE, v, 0, 0, 0)
}

// tailBuffer keeps the last bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (r *recorder) perfRecord(probes []probeDef, sigs <-chan os.Signal) error {
	o := r.opts
	args := perfRecordArgs(o, probes)
	if !o.quiet {
		fmt.Fprintf(r.env.Stderr, "faultline: running %s %s\n", r.perfPath, shellQuote(args))
	}
	cmd := exec.Command(r.perfPath, args...)
	tail := &tailBuffer{max: 8 << 10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.env.Stdin, r.env.Stdout, io.MultiWriter(r.env.Stderr, tail)

	applyTHP := o.noTHP && len(o.cmd) > 0
	if o.noTHP && o.pid > 0 && r.thpEnabled() {
		r.logf("note: transparent huge pages stay on for a running process; one fault may map 2 MiB")
	}
	var prevTHP bool
	if applyTHP {
		var err error
		if prevTHP, err = setTHPDisabled(true); err != nil {
			return prereqError("disabling transparent huge pages: %v; use --no-thp=false", err)
		}
	}
	err := cmd.Start()
	if applyTHP {
		if _, rerr := setTHPDisabled(prevTHP); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return prereqError("starting perf: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timer <-chan time.Time
	if o.duration > 0 {
		t := time.NewTimer(o.duration)
		defer t.Stop()
		timer = t.C
	} else if o.pid > 0 || o.all {
		r.logf("recording; press Ctrl-C to stop")
	}
	stopped := false
	for {
		select {
		case s := <-sigs:
			// A terminal's Ctrl-C reaches perf too; forwarding is for
			// SIGTERM/SIGHUP sent to us alone. perf stops, writes the
			// file and exits; we then remove the probes.
			stopped = true
			cmd.Process.Signal(s)
			continue
		case <-timer:
			stopped = true
			cmd.Process.Signal(os.Interrupt)
			continue
		case err = <-done:
		}
		break
	}
	complete := bytes.Contains(tail.buf, []byte("[ perf record: Captured and wrote"))
	if err != nil && !complete {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: perf record failed (%v): %s", err, oneLine(lastLines(string(tail.buf), 3)))}
	}
	if err != nil && !stopped {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			// perf record exits with the workload's status.
			r.logf("note: %s exited with status %d; the recording is complete", o.cmd[0], ee.ExitCode())
		}
	}
	return nil
}

func (r *recorder) thpEnabled() bool {
	b, err := r.sys.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && bytes.Contains(b, []byte("[always]"))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

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

// eventCounts is what one event recorded and lost.
type eventCounts struct {
	samples, lost uint64
}

// countEvents counts samples and lost samples per event name with the
// perfdata reader. A decoder panic is turned into an error so the caller can
// fall back to perf.
func countEvents(path string) (counts map[string]*eventCounts, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("perfdata: %v", p)
		}
	}()
	rd, err := perfdata.Open(path, &perfdata.Options{Order: perfdata.FileOrder})
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	counts = map[string]*eventCounts{}
	get := func(ev *perfdata.Event) *eventCounts {
		name := "(unknown event)"
		if ev != nil {
			name = ev.Name
		}
		c := counts[name]
		if c == nil {
			c = &eventCounts{}
			counts[name] = c
		}
		return c
	}
	for _, ev := range rd.Events() {
		get(ev)
	}
	for rd.Next() {
		switch rec := rd.Record().(type) {
		case *perfdata.Sample:
			get(rec.Event).samples++
		case *perfdata.LostSamples: // not LOST: it counts the same losses per ring buffer
			get(rec.Event).lost += rec.Count
		}
	}
	return counts, rd.Err()
}

// parsePerfStats reads per-event counts from `perf report --stats`, whose
// per-event blocks look like
//
//	faultline:malloc stats:
//	          SAMPLE events:       1234
//	    LOST_SAMPLES events:         56
//
// It is the fallback when the perfdata reader fails. perf counts
// LOST_SAMPLES records there, not the samples they lost (each record
// carries a count), so the loss it shows can be lower than countEvents'.
func parsePerfStats(out string) map[string]*eventCounts {
	counts := map[string]*eventCounts{}
	var cur *eventCounts
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutSuffix(strings.TrimSpace(line), " stats:"); ok && !strings.HasPrefix(line, " ") {
			cur = nil
			if name != "Aggregated" { // the whole file's totals
				cur = &eventCounts{}
				counts[name] = cur
			}
			continue
		}
		if cur == nil || !strings.HasPrefix(line, " ") {
			cur = nil
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "events:" {
			continue
		}
		n, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "SAMPLE":
			cur.samples = n
		case "LOST_SAMPLES":
			cur.lost = n
		}
	}
	return counts
}

// summarize prints samples and losses per event, advice, and the next
// command.
func (r *recorder) summarize() {
	o := r.opts
	w := r.env.Stderr
	size := ""
	if fi, err := os.Stat(o.output); err == nil {
		size = fmt.Sprintf(" (%.1f MB)", float64(fi.Size())/1e6)
	}
	fmt.Fprintf(w, "faultline: wrote %s%s\n", o.output, size)
	counts, err := countEvents(o.output)
	if err != nil {
		out, _, perr := r.sys.Run(r.perfPath, "report", "--stats", "-i", o.output)
		if perr != nil {
			fmt.Fprintf(w, "faultline: warning: cannot count lost samples: %v\n", err)
			counts = nil
		} else {
			counts = parsePerfStats(string(out))
		}
	}
	if len(counts) > 0 {
		lost := writeLossTable(w, counts)
		if lost {
			fmt.Fprintf(w, "Samples were lost: perf's ring buffer filled faster than perf wrote it out.\n"+
				"Losses are normal input for analyze, but fewer is better: raise -m (now %d, try %d),\n"+
				"lower --stack-size (now %d, try %d), or record a shorter run.\n",
				o.mmapPages, o.mmapPages*4, o.stackSize, max(o.stackSize/2, 1024))
		}
	}
	fmt.Fprintf(w, "Next: faultline analyze %s -o faults.pb.gz && go tool pprof -top faults.pb.gz\n", shellQuote([]string{o.output}))
}

// writeLossTable prints one row per event; it reports whether any lost.
func writeLossTable(w io.Writer, counts map[string]*eventCounts) bool {
	var names []string
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	width := len("event")
	for _, n := range names {
		width = max(width, len(n))
	}
	// Numbers align right; the padded name column reads left-aligned.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tsamples\tlost\tlost%%\t\n", width, "event")
	any := false
	for _, n := range names {
		c := counts[n]
		rate := 0.0
		if c.samples+c.lost > 0 {
			rate = 100 * float64(c.lost) / float64(c.samples+c.lost)
		}
		any = any || c.lost > 0
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%.1f%%\t\n", width, n, c.samples, c.lost, rate)
	}
	tw.Flush()
	return any
}
