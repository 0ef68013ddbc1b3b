package cli

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/libc"
	"github.com/faultline/faultline/cmd/faultline/internal/libc/libctest"
	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// fakeSys is a scripted outside world. Files map to literal contents or
// to real files (for ELF contents); uprobe_events behaves like tracefs:
// "p:"/"r:" lines add a probe, "-:G/E" removes one, EBUSY when in use.
type fakeSys struct {
	libctest.Files
	euid   int
	path   map[string]string // LookPath results
	run    map[string]fakeRun
	probes []string // uprobe_events lines
	busy   map[string]bool
	// rejectLine is a probe line the kernel refuses (EINVAL), as it does
	// a definition it cannot parse.
	rejectLine string
	canMount   bool
	mounted    []string
	writes     []string
	env        map[string]string
	chowned    []string
	alive      map[int]bool
	pid        int
	regular    map[string]bool // IsRegular answers; default true for known files
	noExec     map[string]bool // Executable fails for these
	// skips: the next reads of uprobe_events leave out lines, [from, to)
	// each, as a read of the seq_file does while another process removes
	// probes listed before them.
	skips [][2]int
	// noGroupRemoval: "-:GROUP/" is refused (EINVAL), as by a kernel that
	// removes probes only one by one.
	noGroupRemoval bool
}

type fakeRun struct {
	out, errOut string
	err         error
}

const fakeEvents = "/sys/kernel/tracing/uprobe_events"

func newFakeSys() *fakeSys {
	return &fakeSys{
		Files:   libctest.Files{Text: map[string]string{fakeEvents: ""}, Real: map[string]string{}},
		path:    map[string]string{},
		run:     map[string]fakeRun{},
		busy:    map[string]bool{},
		alive:   map[int]bool{},
		pid:     4242,
		regular: map[string]bool{},
	}
}

func (f *fakeSys) LookPath(file string) (string, error) {
	if p, ok := f.path[file]; ok {
		return p, nil
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", file)
}

func (f *fakeSys) Run(name string, args ...string) ([]byte, []byte, error) {
	r, ok := f.run[strings.Join(append([]string{name}, args...), " ")]
	if !ok {
		return nil, nil, errors.New("unexpected command")
	}
	return []byte(r.out), []byte(r.errOut), r.err
}

func (f *fakeSys) ReadFile(path string) ([]byte, error) {
	if _, ok := f.Text[path]; ok && path == fakeEvents {
		lines := f.probes
		if len(f.skips) > 0 {
			s := f.skips[0]
			f.skips = f.skips[1:]
			lines = append(append([]string(nil), lines[:min(s[0], len(lines))]...), lines[min(s[1], len(lines)):]...)
		}
		return []byte(strings.Join(lines, "\n") + "\n"), nil
	}
	return f.Files.ReadFile(path)
}

func (f *fakeSys) Open(path string) (libc.File, error) { return f.Files.Open(path) }

func (f *fakeSys) Inode(path string) (uint64, error) { return 0, fs.ErrNotExist }
func (f *fakeSys) Getenv(key string) string          { return f.env[key] }
func (f *fakeSys) Geteuid() int                      { return f.euid }

func (f *fakeSys) Getpid() int { return f.pid }

func (f *fakeSys) Fchown(file *os.File, uid, gid int) error {
	f.chowned = append(f.chowned, fmt.Sprintf("%s %d:%d", filepath.Base(file.Name()), uid, gid))
	return nil
}

func (f *fakeSys) ProcessAlive(pid int) bool { return f.alive[pid] }

func (f *fakeSys) Executable(path string) error {
	if f.noExec[path] {
		return syscall.EACCES
	}
	return nil
}

func (f *fakeSys) IsRegular(path string) (bool, error) {
	if r, ok := f.regular[path]; ok {
		return r, nil
	}
	if !f.Exists(path) {
		return false, fs.ErrNotExist
	}
	return true, nil
}

func (f *fakeSys) MountTracefs(dir string) error {
	if !f.canMount {
		return syscall.EPERM
	}
	f.mounted = append(f.mounted, dir)
	f.Text[filepath.Join(dir, "uprobe_events")] = ""
	return nil
}

func (f *fakeSys) AppendLine(path, line string) error {
	if path != fakeEvents {
		return fmt.Errorf("write to %s", path)
	}
	f.writes = append(f.writes, line)
	if group, ok := strings.CutPrefix(line, "-:"); ok && strings.HasSuffix(group, "/") {
		// The whole group, in list order, stopping at a busy probe.
		if f.noGroupRemoval {
			return &fs.PathError{Op: "write", Path: path, Err: syscall.EINVAL}
		}
		n := 0
		for i := 0; i < len(f.probes); {
			name, _, _ := strings.Cut(f.probes[i][2:], " ")
			if !strings.HasPrefix(name, group) {
				i++
				continue
			}
			if f.busy[name] {
				return &fs.PathError{Op: "write", Path: path, Err: syscall.EBUSY}
			}
			f.probes = append(f.probes[:i], f.probes[i+1:]...)
			n++
		}
		if n == 0 {
			return &fs.PathError{Op: "write", Path: path, Err: syscall.ENOENT}
		}
		return nil
	}
	if name, ok := strings.CutPrefix(line, "-:"); ok {
		for i, p := range f.probes {
			if strings.HasPrefix(p[2:], name+" ") {
				if f.busy[name] {
					return &fs.PathError{Op: "write", Path: path, Err: syscall.EBUSY}
				}
				f.probes = append(f.probes[:i], f.probes[i+1:]...)
				delete(f.Text, fakeEventDir(name)+"/id")
				delete(f.Text, fakeEventDir(name)+"/format")
				return nil
			}
		}
		return &fs.PathError{Op: "write", Path: path, Err: syscall.ENOENT}
	}
	if !strings.HasPrefix(line, "p:") && !strings.HasPrefix(line, "r:") || line == f.rejectLine {
		return &fs.PathError{Op: "write", Path: path, Err: syscall.EINVAL}
	}
	f.probes = append(f.probes, line)
	// The kernel makes the event's directory: an id and a format.
	name, _, _ := strings.Cut(line[2:], " ")
	f.Text[fakeEventDir(name)+"/id"] = strconv.Itoa(1000+len(f.writes)) + "\n"
	f.Text[fakeEventDir(name)+"/format"] = "name: " + name + "\n"
	return nil
}

// fakeEventDir is tracefs' directory of the event GROUP/EVENT.
func fakeEventDir(groupEvent string) string {
	return "/sys/kernel/tracing/events/" + groupEvent
}

func newTestRecorder(sys *fakeSys, o *recordOptions) (*recorder, *bytes.Buffer) {
	var errb bytes.Buffer
	if o == nil {
		o = &recordOptions{output: "faultline.data", recordStacks: recordStacks{stackSize: 8192}, recordRings: recordRings{mmapPages: 4096, stackPages: 1024}, cmd: []string{"true"}}
	}
	return &recorder{sys: sys, env: &Env{Stdout: &bytes.Buffer{}, Stderr: &errb}, opts: o, group: rec.ProbeGroup(sys.pid)}, &errb
}

func exitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if err != nil {
		return ExitFailure
	}
	return ExitOK
}

func TestRecordFlags(t *testing.T) {
	env := &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	o, err := parseRecordFlags(env, []string{"--", "sort", "-n", "file"})
	if err != nil {
		t.Fatal(err)
	}
	// The C names, then every family's own (probed where the allocator
	// found is of that family).
	all := "malloc,calloc,realloc,reallocarray,free,memalign,aligned_alloc,posix_memalign,valloc,pvalloc,op_new,"
	probes := strings.Join(o.probes, ",")
	if o.output != "faultline.data" || o.stackSize != 0 || o.mmapPages != 4096 || o.stackPages != 1024 || o.noTHP || o.residentEvery != defaultResidentEvery || o.noExitSnapshots || !o.compress ||
		o.stackMin != 4096 || o.stackEvery != defaultStackEvery || o.faultStacks ||
		strings.Join(o.cmd, " ") != "sort -n file" || !strings.HasPrefix(probes, all) ||
		!strings.Contains(probes, ",mallocx,") || !strings.Contains(probes, ",tc_new,") || !strings.Contains(probes, ",mi_zalloc,") {
		t.Errorf("defaults: %+v", o)
	}
	// Flags after the command belong to it, even without --.
	o, err = parseRecordFlags(env, []string{"-z", "--probe", "free,calloc", "--stack-every=8", "--fault-stacks", "ls", "-l"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.cmd, " ") != "ls -l" || !o.compress || o.stackEvery != 8 || !o.faultStacks ||
		strings.Join(o.probes, ",") != "malloc,calloc,free" {
		t.Errorf("got %+v", o)
	}
	// --no-compress wins over the default and over -z.
	for _, args := range [][]string{{"--no-compress", "ls"}, {"-z", "--no-compress", "ls"}, {"--compress=false", "ls"}} {
		if o, err = parseRecordFlags(env, args); err != nil || o.compress {
			t.Errorf("%q: compress=%v, %v", args, o != nil && o.compress, err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "nothing to record"},
		{[]string{"-p", "12", "-a"}, "exclude each other"},
		{[]string{"-p", "12", "--", "ls"}, "not both"},
		{[]string{"-p", "-3"}, "process id"},
		{[]string{"--stack-size", "100", "ls"}, "multiple of 8"},
		{[]string{"--stack-size", "65536", "ls"}, "65528"},
		{[]string{"--stack-size", "0", "ls"}, "between 8 and 65528"},
		{[]string{"-m", "1000", "ls"}, "power of two"},
		{[]string{"--stack-mmap-pages", "3", "ls"}, "power of two"},
		{[]string{"--stack-every", "0", "ls"}, "1 or more"},
		{[]string{"--probe", "mmap", "ls"}, `unknown function "mmap"`},
		{[]string{"--duration", "soon", "-a"}, "invalid argument"},
		{[]string{"--perf", "/usr/bin/perf", "ls"}, "unknown flag"},
	} {
		_, err := parseRecordFlags(env, tc.args)
		if exitCode(err) != ExitFailure || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want exit 2 and %q", tc.args, err, tc.want)
		}
	}
	help := env.Stdout.(*bytes.Buffer)
	if o, err := parseRecordFlags(env, []string{"--help"}); o != nil || err != nil {
		t.Errorf("--help: %v %v", o, err)
	}
	for _, want := range []string{"sudo faultline record", "--stack-min", "--stack-every", "--fault-stacks", "--stack-mmap-pages", "perf tool is not needed", "128+N"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
	// --help after CMD is CMD's.
	if o, err := parseRecordFlags(env, []string{"-q", "sort", "--help"}); err != nil || o == nil || strings.Join(o.cmd, " ") != "sort --help" {
		t.Errorf("sort --help: %+v %v", o, err)
	}
}

// TestGiveToInvoker: under sudo the recording goes to the user who ran
// sudo, through the descriptor record created, so analyze works without
// sudo.
func TestGiveToInvoker(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base := filepath.Base(f.Name())
	for _, tc := range []struct {
		euid int
		env  map[string]string
		want string
	}{
		{0, map[string]string{"SUDO_UID": "1000", "SUDO_GID": "1001"}, base + " 1000:1001"},
		{0, map[string]string{"SUDO_UID": "1000"}, base + " 1000:-1"},
		{0, nil, ""}, // root without sudo
		{0, map[string]string{"SUDO_UID": "0"}, ""},       // sudo from root
		{0, map[string]string{"SUDO_UID": "bob"}, ""},     // not a uid
		{1000, map[string]string{"SUDO_UID": "1000"}, ""}, // not root: the file is ours already
	} {
		sys := newFakeSys()
		sys.euid, sys.env = tc.euid, tc.env
		r, _ := newTestRecorder(sys, nil)
		r.giveToInvoker(f)
		if got := strings.Join(sys.chowned, ","); got != tc.want {
			t.Errorf("euid %d env %v: chowned %q, want %q", tc.euid, tc.env, got, tc.want)
		}
	}
}

// TestOutputNeverFollowsSymlinks plants a symlink at
// the output name, pointing at a file record must not touch. The output is
// a new file renamed over the link; the target keeps its contents, and
// "-o -" never creates a file named "-".
func TestOutputNeverFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.data")
	if err := os.Symlink(target, out); err != nil {
		t.Fatal(err)
	}
	sys := newFakeSys()
	sys.env = map[string]string{"SUDO_UID": "1000", "SUDO_GID": "1000"}
	r, _ := newTestRecorder(sys, &recordOptions{output: out})
	o, err := r.createOutput()
	if err != nil {
		t.Fatal(err)
	}
	o.File().WriteString("recording")
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious" {
		t.Errorf("symlink target overwritten: %q", b)
	}
	fi, err := os.Lstat(out)
	if err != nil || fi.Mode()&os.ModeSymlink != 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("output: %v, mode %v; want a regular 0600 file", err, fi.Mode())
	}
	if b, _ := os.ReadFile(out); string(b) != "recording" {
		t.Errorf("output holds %q", b)
	}
	// The chown went to the file created, never to a path: the unnamed
	// file (O_TMPFILE; its *os.File carries the output's name) or, where
	// the filesystem has no O_TMPFILE, a temporary name in the directory.
	if len(sys.chowned) != 1 || sys.chowned[0] != "out.data 1000:1000" && !strings.HasPrefix(sys.chowned[0], ".out.data.") || !strings.HasSuffix(sys.chowned[0], " 1000:1000") {
		t.Errorf("chowned %q", sys.chowned)
	}
	// An aborted recording leaves nothing behind.
	r.opts.output = filepath.Join(dir, "aborted.data")
	o, err = r.createOutput()
	if err != nil {
		t.Fatal(err)
	}
	o.Discard()
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("after discard: %v", ents)
	}

	// -o -: standard output, no file named "-".
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(dir)
	var stdout bytes.Buffer
	r, _ = newTestRecorder(sys, &recordOptions{output: "-"})
	r.env.Stdout = &stdout
	o, err = r.createOutput()
	if err != nil {
		t.Fatal(err)
	}
	if o.File() != nil || o.W != r.env.Stdout {
		t.Errorf("-o -: file %v, writer %T; want standard output itself", o.File(), o.W)
	}
	io.WriteString(o.W, "to stdout")
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "to stdout" {
		t.Errorf("stdout got %q", stdout.String())
	}
	if _, err := os.Lstat(filepath.Join(dir, "-")); err == nil {
		t.Errorf("a file named - was created")
	}
}

func TestProbeDefinitions(t *testing.T) {
	path := libctest.SystemLibc(t)
	sys := newFakeSys()
	sys.Real["/lib/libc.so.6"] = path
	lib, err := libc.Open(sys, "/lib/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	funcs, _ := rec.CanonicalProbes([]string{"calloc", "free", "memalign", "aligned_alloc", "posix_memalign", "reallocarray"})
	defs, notes, err := rec.UprobeDefinitions(sys, "/lib/libc.so.6", "faultline_4242", funcs)
	if err != nil {
		t.Fatal(err)
	}
	off := func(syms ...string) uint64 {
		o, _, ok := lib.Offset(syms...)
		if !ok {
			t.Fatalf("no %v", syms)
		}
		return o
	}
	// Offsets from our libc reader; the symbols they come from are what
	// readelf -Ws lists (checked by the libc package's own tests).
	// Allocating entries also fetch SP, BP and the 16 words from SP up,
	// word i at SP+8i (the tracefs spelling of a memory fetch at an offset
	// from a register: +OFF(%REG)).
	top := " sp=%sp:u64 bp=%bp:u64"
	for i := 0; i < 16; i++ {
		top += fmt.Sprintf(" s%d=+%d(%%sp):u64", i, 8*i)
	}
	want := []string{
		fmt.Sprintf("p:faultline_4242/malloc /lib/libc.so.6:%#x size=%%di:u64", off("malloc")) + top,
		fmt.Sprintf("r:faultline_4242/malloc__return /lib/libc.so.6:%#x ptr=$retval hdr=-8($retval):u64", off("malloc")),
		fmt.Sprintf("p:faultline_4242/calloc /lib/libc.so.6:%#x nmemb=%%di:u64 size=%%si:u64", off("__libc_calloc")) + top,
		fmt.Sprintf("r:faultline_4242/calloc__return /lib/libc.so.6:%#x ptr=$retval hdr=-8($retval):u64", off("__libc_calloc")),
		fmt.Sprintf("p:faultline_4242/reallocarray /lib/libc.so.6:%#x oldptr=%%di:u64 nmemb=%%si:u64 size=%%dx:u64", off("reallocarray")) + top,
		fmt.Sprintf("r:faultline_4242/reallocarray__return /lib/libc.so.6:%#x ptr=$retval hdr=-8($retval):u64", off("reallocarray")),
		fmt.Sprintf("p:faultline_4242/free /lib/libc.so.6:%#x ptr=%%di:u64", off("free")),
		fmt.Sprintf("p:faultline_4242/memalign /lib/libc.so.6:%#x alignment=%%di:u64 size=%%si:u64", off("memalign")) + top,
		fmt.Sprintf("r:faultline_4242/memalign__return /lib/libc.so.6:%#x ptr=$retval hdr=-8($retval):u64", off("memalign")),
	}
	if off("aligned_alloc") != off("memalign") {
		t.Skip("this libc's aligned_alloc is not memalign; the expectations below assume glibc 2.36")
	}
	want = append(want,
		fmt.Sprintf("p:faultline_4242/posix_memalign /lib/libc.so.6:%#x memptr=%%di:u64 alignment=%%si:u64 size=%%dx:u64", off("posix_memalign"))+top,
		fmt.Sprintf("r:faultline_4242/posix_memalign__return /lib/libc.so.6:%#x ret=$retval:s32", off("posix_memalign")))
	var got []string
	for _, d := range defs {
		got = append(got, d.Line)
		entry := !strings.HasSuffix(d.Event, "__return")
		if d.Sized != (entry && d.Event != "free") || d.HasNmemb != (d.Event == "calloc" || d.Event == "reallocarray") {
			t.Errorf("%s: sized %v nmemb %v", d.Event, d.Sized, d.HasNmemb)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var dn *rec.DetailNote
	if len(notes) != 1 || !strings.Contains(notes[0].Error(), "aligned_alloc is the same function as memalign") || !errors.As(notes[0], &dn) {
		t.Errorf("notes = %q, want one detail (said only with -v)", notes)
	}
}

// TestProbePathValidation: a library path (from the
// program's DT_NEEDED, the maps of a process, or --libc) with a newline
// would inject a command into uprobe_events. It is refused before
// anything is written; so are other separators and non-regular files.
func TestProbePathValidation(t *testing.T) {
	path := libctest.SystemLibc(t)
	for _, bad := range []string{
		"/tmp/x\n-:probe_libc/malloc\n/lib/libc.so.6",
		"/tmp/with space/libc.so.6",
		"/tmp/tab\tlibc.so.6",
		"/tmp/colon:libc.so.6",
		"/tmp/bell\alibc.so.6",
	} {
		sys := newFakeSys()
		sys.Real[bad] = path
		_, _, err := rec.UprobeDefinitions(sys, bad, "faultline_4242", []string{"malloc"})
		if err == nil || !strings.Contains(err.Error(), "refusing to write it to uprobe_events") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
	sys := newFakeSys()
	sys.Real["/dev/libc.so.6"] = path
	sys.regular["/dev/libc.so.6"] = false
	if _, _, err := rec.UprobeDefinitions(sys, "/dev/libc.so.6", "faultline_4242", []string{"malloc"}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("non-regular: %v", err)
	}
	// The last guard: no line with a control character reaches tracefs.
	tfs, _, err := rec.OpenTracefs(sys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tfs.AddUprobes([]rec.UprobeDef{{Event: "malloc", Line: "p:faultline_4242/malloc /x:0x1\n-:other/ev"}}); err == nil || len(sys.writes) != 0 {
		t.Errorf("control character written: %v %q", err, sys.writes)
	}
}

func TestCheckPrivileges(t *testing.T) {
	sys := newFakeSys()
	r, _ := newTestRecorder(sys, nil)
	if err := r.checkPrivileges(); err != nil {
		t.Errorf("root: %v", err)
	}
	sys.euid = 1000
	sys.Text["/proc/sys/kernel/perf_event_paranoid"] = "2\n"
	err := r.checkPrivileges()
	if exitCode(err) != ExitFailure || !strings.Contains(err.Error(), "sudo faultline record") || !strings.Contains(err.Error(), "perf_event_paranoid is 2") {
		t.Errorf("non-root: %v", err)
	}
}

func TestEnsureTracefs(t *testing.T) {
	sys := newFakeSys()
	r, _ := newTestRecorder(sys, nil)
	if tfs, err := r.openTracefs(); err != nil || len(sys.mounted) != 0 || tfs.Dir() != "/sys/kernel/tracing" {
		t.Errorf("mounted already: %v %v", err, sys.mounted)
	}
	// Only the old debugfs location.
	sys = newFakeSys()
	delete(sys.Text, fakeEvents)
	sys.Text["/sys/kernel/debug/tracing/uprobe_events"] = ""
	r, _ = newTestRecorder(sys, nil)
	if tfs, err := r.openTracefs(); err != nil || tfs.Dir() != "/sys/kernel/debug/tracing" {
		t.Errorf("debugfs: %v %v", err, tfs)
	}
	// Not mounted: mount it and say so.
	sys = newFakeSys()
	delete(sys.Text, fakeEvents)
	sys.canMount = true
	r, errb := newTestRecorder(sys, nil)
	if _, err := r.openTracefs(); err != nil || strings.Join(sys.mounted, " ") != "/sys/kernel/tracing" || !strings.Contains(errb.String(), "mounted tracefs at /sys/kernel/tracing") {
		t.Errorf("mount: %v %v %q", err, sys.mounted, errb.String())
	}
	// Cannot mount: the error gives the command.
	sys.canMount = false
	delete(sys.Text, fakeEvents)
	_, err := r.openTracefs()
	if exitCode(err) != ExitFailure || !strings.Contains(err.Error(), "mount -t tracefs nodev /sys/kernel/tracing") {
		t.Errorf("no mount: %v", err)
	}
}

// TestProbeLifecycle: a run's probes are values (rec.Uprobes) whose Close
// removes exactly what was added; stale groups of dead runs go, every
// other group stays.
func TestProbeLifecycle(t *testing.T) {
	others := []string{
		"p:probe_libc/malloc /usr/lib/x86_64-linux-gnu/libc.so.6:0x0000000000098930 size=%di:u64",
		"r:probe_libc/malloc__return /usr/lib/x86_64-linux-gnu/libc.so.6:0x0000000000098930 ptr=$retval",
		// A run of an older faultline (no pid): not ours to judge.
		"p:faultline/malloc /lib/libc.so.6:0x98930 size=%di:u64",
		// A run that is still going (pid 1000 alive).
		"p:faultline_1000/malloc /lib/libc.so.6:0x98930 size=%di:u64",
	}
	defs := []rec.UprobeDef{
		{Event: "malloc", Line: "p:faultline_4242/malloc /lib/libc.so.6:0x98930 size=%di:u64", Sized: true},
		{Event: "malloc__return", Line: "r:faultline_4242/malloc__return /lib/libc.so.6:0x98930 ptr=$retval hdr=-8($retval):u64"},
	}
	open := func(sys *fakeSys) *rec.Tracefs {
		t.Helper()
		tfs, _, err := rec.OpenTracefs(sys)
		if err != nil {
			t.Fatal(err)
		}
		return tfs
	}

	// A clean run: others' probes untouched, ours added then removed.
	sys := newFakeSys()
	sys.alive[1000] = true
	sys.probes = append([]string(nil), others...)
	r, errb := newTestRecorder(sys, nil)
	tfs := open(sys)
	if err := r.removeStale(tfs); err != nil || errb.Len() != 0 {
		t.Fatalf("removeStale: %v %q", err, errb.String())
	}
	up, err := tfs.AddUprobes(defs)
	if err != nil {
		t.Fatal(err)
	}
	if len(sys.probes) != len(others)+2 || len(up.Missing()) != 0 {
		t.Errorf("probes after add: %q", sys.probes)
	}
	// Each probe carries the id and format tracefs gave it.
	for i, p := range up.Probes() {
		id := sys.Text[fakeEventDir("faultline_4242/"+defs[i].Event)+"/id"]
		if p.Event != defs[i].Event || strconv.FormatUint(p.ID, 10)+"\n" != id || string(p.Format) != "name: faultline_4242/"+p.Event+"\n" || p.Sized != defs[i].Sized {
			t.Errorf("probe %d: %+v, id file %q", i, p, id)
		}
	}
	if err := up.Close(); err != nil {
		t.Error(err)
	}
	if err := up.Close(); err != nil { // a second Close removes nothing more
		t.Error(err)
	}
	if strings.Join(sys.probes, "\n") != strings.Join(others, "\n") {
		t.Errorf("probes after remove: %q", sys.probes)
	}
	if got := strings.Join(sys.writes, "\n"); got != defs[0].Line+"\n"+defs[1].Line+"\n-:faultline_4242/malloc__return\n-:faultline_4242/malloc" {
		t.Errorf("writes:\n%s", got)
	}

	// Stale probes of killed runs (pid 999 gone; 4242 is our own pid, so
	// its group is a dead run's whose pid was reused) are removed and we
	// say so; the live run's and the old group stay.
	sys = newFakeSys()
	sys.alive[1000] = true
	sys.probes = append(append([]string(nil), others...),
		"p:faultline_999/malloc /lib/libc.so.6:0x98930 size=%di:u64",
		"p:faultline_999/free /lib/libc.so.6:0x98ef0 ptr=%di:u64",
		"p:faultline_4242/malloc /lib/libc.so.6:0x98930 size=%di:u64")
	r, errb = newTestRecorder(sys, nil)
	if err := r.removeStale(open(sys)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(sys.probes, "\n") != strings.Join(others, "\n") ||
		!strings.Contains(errb.String(), "removed the probes of faultline_999, left by a run that was killed (malloc, free)") ||
		!strings.Contains(errb.String(), "removed the probes of faultline_4242") {
		t.Errorf("stale: %q, %q", sys.probes, errb.String())
	}
	// A stale probe a process still has open stays, and we say so.
	sys = newFakeSys()
	sys.probes = []string{"p:faultline_999/malloc /lib/libc.so.6:0x98930 size=%di:u64", "p:faultline_999/free /lib/libc.so.6:0x98ef0 ptr=%di:u64"}
	sys.busy["faultline_999/free"] = true
	r, errb = newTestRecorder(sys, nil)
	if err := r.removeStale(open(sys)); err != nil || len(sys.probes) != 1 ||
		!strings.Contains(errb.String(), "stale probe faultline_999:free is in use; left alone") ||
		!strings.Contains(errb.String(), "removed the probes of faultline_999, left by a run that was killed (malloc)") {
		t.Errorf("busy stale: %v %q %q", err, sys.probes, errb.String())
	}

	// A run whose probes someone removed while it recorded knows it.
	sys = newFakeSys()
	up, err = open(sys).AddUprobes(defs)
	if err != nil {
		t.Fatal(err)
	}
	sys.probes = sys.probes[:1]
	if m := up.Missing(); strings.Join(m, ",") != "faultline_4242:malloc__return" {
		t.Errorf("missing = %q", m)
	}

	// A failed add: what was added before it is removed at once, and
	// nothing else is written.
	sys = newFakeSys()
	bad := append([]rec.UprobeDef(nil), defs...)
	bad[1].Line = "r:faultline_4242/malloc__return garbage"
	sys.rejectLine = bad[1].Line
	if _, err := open(sys).AddUprobes(bad); err == nil || !strings.Contains(err.Error(), "adding probe faultline_4242:malloc__return") {
		t.Errorf("bad probe: %v", err)
	}
	if len(sys.probes) != 0 || strings.Join(sys.writes, "\n") != defs[0].Line+"\n"+bad[1].Line+"\n-:faultline_4242/malloc" {
		t.Errorf("after failed add: probes %q, writes %q", sys.probes, sys.writes)
	}
	// A line that does not define the event it is given for is refused
	// before it is written.
	sys = newFakeSys()
	if _, err := open(sys).AddUprobes([]rec.UprobeDef{{Event: "malloc", Line: "-:faultline_999/malloc"}}); err == nil || len(sys.writes) != 0 {
		t.Errorf("a removal passed as a probe: %v, writes %q", err, sys.writes)
	}
	// A probe still busy when removed is retried, then left with a
	// note that says how to remove it.
	sys = newFakeSys()
	up, err = open(sys).AddUprobes(defs[:1])
	if err != nil {
		t.Fatal(err)
	}
	sys.busy["faultline_4242/malloc"] = true
	if err := up.Close(); err == nil || !strings.Contains(err.Error(), "echo '-:faultline_4242/malloc' >> /sys/kernel/tracing/uprobe_events") {
		t.Errorf("busy probe: %v", err)
	}
}

// TestRemoveStaleRereads: a read of uprobe_events that skips lines of a
// dead run's group (as one does while another process removes probes
// listed before them) does not leave them behind: the group is removed
// whole ("-:GROUP/") where the kernel can; where it cannot, RemoveStale
// reads again until two reads in a row list nothing more to remove.
func TestRemoveStaleRereads(t *testing.T) {
	live := "p:faultline_1000/malloc /lib/libc.so.6:0x98930 size=%di:u64"
	events := []string{"malloc", "malloc__return", "calloc", "free", "memalign"}
	for _, whole := range []bool{true, false} {
		sys := newFakeSys()
		sys.alive[1000] = true
		sys.noGroupRemoval = !whole
		sys.probes = []string{live}
		for _, ev := range events {
			sys.probes = append(sys.probes, "p:faultline_999/"+ev+" /lib/libc.so.6:0x98930 size=%di:u64")
		}
		// The first read misses the dead group's first three lines, the
		// second all of them, the third none.
		sys.skips = [][2]int{{1, 4}, {0, 6}}
		tfs, _, err := rec.OpenTracefs(sys)
		if err != nil {
			t.Fatal(err)
		}
		stale, err := tfs.RemoveStale()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(sys.probes, "\n") != live {
			t.Errorf("whole %v: left %q; want only the live run's", whole, sys.probes)
		}
		// Removed names what the reads saw: whole, the first read's two.
		want := "free,memalign"
		if !whole {
			want = "free,memalign,malloc,malloc__return,calloc"
		}
		if len(stale) != 1 || stale[0].Group != "faultline_999" || strings.Join(stale[0].Removed, ",") != want {
			t.Errorf("whole %v: stale groups %+v, want faultline_999 with %s removed", whole, stale, want)
		}
		if !slices.Contains(sys.writes, "-:faultline_999/") {
			t.Errorf("whole %v: writes %q, want the group removal tried first", whole, sys.writes)
		}
	}
}

func TestProbeGroups(t *testing.T) {
	text := "p:probe_libc/malloc /lib/libc.so.6:0x1 size=%di:u64\n" +
		"r:faultline_7/malloc__return /lib/libc.so.6:0x1 ptr=$retval\n" +
		"p:faultline_x/malloc /lib/libc.so.6:0x1\n" +
		"p:faultline_7/free /lib/libc.so.6:0x2 ptr=%di:u64\n\n"
	g := rec.ParseProbeGroups(text)
	if len(g) != 3 || strings.Join(g["faultline_7"], ",") != "malloc__return,free" || strings.Join(g["probe_libc"], ",") != "malloc" {
		t.Errorf("ParseProbeGroups = %v", g)
	}
}

func TestLossTable(t *testing.T) {
	var b bytes.Buffer
	writeLossTable(&b, []rec.EventCount{
		{Name: "faultline_7:malloc", Samples: 500},
		{Name: "faultline_7:malloc/stack-big/", Stack: true, Filter: "size >= 4096", Samples: 3},
		{Name: "faultline_7:malloc/stack-1in64/", Stack: true, Filter: "size < 4096", Samples: 7, Lost: 2},
		{Name: "faultline_7:valloc"},
	})
	// Names left-aligned to the longest (31 characters), numbers
	// right-aligned under their headers.
	want := "  event                            samples  lost\n" +
		"  faultline_7:malloc                   500     0\n" +
		"  faultline_7:malloc/stack-big/          3     0\n" +
		"  faultline_7:malloc/stack-1in64/        7     2\n" +
		"  (1 more events recorded nothing; faultline info lists them all)\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant\n%s", b.String(), want)
	}
}

// TestRecordExitStatusOwnFailures: record's own failures exit 125, a
// command that is not found 127 and one that cannot be executed 126 (the
// convention of env, nice and timeout), all before a probe is added.
func TestRecordExitStatusOwnFailures(t *testing.T) {
	// Through Main: a bad flag and a bad value are record's failures.
	for _, args := range [][]string{{"--bogus", "ls"}, {"--stack-every", "0", "ls"}, {}} {
		var errb bytes.Buffer
		code := Main(append([]string{"record"}, args...), &Env{Stdout: &bytes.Buffer{}, Stderr: &errb})
		if code != ExitRecordFailed || !strings.HasPrefix(errb.String(), "faultline: record: ") {
			t.Errorf("record %v: exit %d, stderr %q; want %d", args, code, errb.String(), ExitRecordFailed)
		}
	}
	if code := Main([]string{"record", "--help"}, &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}); code != ExitOK {
		t.Errorf("record --help: exit %d", code)
	}

	sys := newFakeSys()
	sys.Text["/bin/script"] = "#!/bin/sh\nexit 0\n"
	sys.Text["/bin/elf"] = "\x7fELF\x02\x01\x01"
	sys.Text["/bin/text"] = "hello\n"
	sys.Text["/bin/noexec"] = "#!/bin/sh\n"
	sys.Text["/bin/dir"] = ""
	sys.regular["/bin/dir"] = false
	sys.noExec = map[string]bool{"/bin/noexec": true}
	sys.path["script"] = "/bin/script"
	for _, tc := range []struct {
		cmd, libc string
		code      int
		want      string
	}{
		{"nosuchcmd", "", ExitNotFound, `command "nosuchcmd" not found in PATH`},
		{"./nosuchfile", "", ExitNotFound, "./nosuchfile: no such file"},
		{"/bin/noexec", "", ExitCannotExecute, "no execute permission"},
		{"/bin/dir", "", ExitCannotExecute, "not a regular file"},
		{"/bin/text", "", ExitCannotExecute, "neither an ELF binary nor a #! script"},
		// Found and executable: the missing --libc is record's failure.
		{"script", "/no/libc.so.6", ExitRecordFailed, "--libc /no/libc.so.6: no such file"},
		{"/bin/elf", "/no/libc.so.6", ExitRecordFailed, "--libc /no/libc.so.6: no such file"},
	} {
		r, _ := newTestRecorder(sys, nil)
		r.opts.cmd, r.opts.libc = []string{tc.cmd}, tc.libc
		err := recordStatus(r.run())
		if exitCode(err) != tc.code || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("%s: exit %d (%v), want %d and %q", tc.cmd, exitCode(err), err, tc.code, tc.want)
		}
	}
	if len(sys.writes) != 0 {
		t.Errorf("probes were written before the command was checked: %q", sys.writes)
	}
}

// TestRecordExitStatusOfCommand: the program's status passes through,
// 128+N for signal N, and a program record stopped when --duration
// elapsed exits 0.
func TestRecordExitStatusOfCommand(t *testing.T) {
	r, _ := newTestRecorder(newFakeSys(), nil)
	for _, tc := range []struct {
		res  rec.Result
		code int
	}{
		{rec.Result{Program: rec.Program{Ran: true}}, ExitOK},
		{rec.Result{Program: rec.Program{Ran: true, ExitCode: 2}}, 2},
		{rec.Result{Program: rec.Program{Ran: true, ExitCode: 125}}, 125},
		{rec.Result{Program: rec.Program{Ran: true, Signal: syscall.SIGSEGV}}, 128 + 11},
		{rec.Result{Program: rec.Program{Ran: true, Signal: syscall.SIGINT, StoppedBy: "interrupt"}}, 128 + 2},
		{rec.Result{Program: rec.Program{Ran: true, Signal: syscall.SIGINT, StoppedBy: rec.StoppedByDuration}}, ExitOK},
		{rec.Result{Program: rec.Program{Ran: true, ExitCode: 1, StoppedBy: rec.StoppedByDuration}}, ExitOK},
		{rec.Result{Program: rec.Program{Ran: true, Unfinished: true, StoppedBy: rec.StoppedByDuration}}, ExitOK},
		{rec.Result{}, ExitOK}, // -p, -a
	} {
		if got := exitCode(recordStatus(r.exitStatus(&tc.res))); got != tc.code {
			t.Errorf("%+v: exit %d, want %d", tc.res, got, tc.code)
		}
	}
}

// TestRecordSummaryCost: the summary gives the probe hits with the
// program's times — stack instances and faults are not hits of their own —
// and says when record stopped the program at --duration. The numbers are
// churn 200000's (testdata/record) on the 2-core VM: 600664 hits, user
// 1.15 s + sys 5.72 s, so (user+sys)/hits = 11.4 µs, the figure
// docs/performance.md gives.
func TestRecordSummaryCost(t *testing.T) {
	var stderr bytes.Buffer
	r := &recorder{env: &Env{Stderr: &stderr}, opts: &recordOptions{output: "x.data", cmd: []string{"/tmp/churn"}, duration: 5 * time.Second}}
	res := &rec.Result{Program: rec.Program{Ran: true, Wall: 16520 * time.Millisecond, User: 1150 * time.Millisecond, Sys: 5720 * time.Millisecond,
		Signal: syscall.SIGINT, StoppedBy: rec.StoppedByDuration},
		Events: []rec.EventCount{
			{Name: "page-faults", Samples: 61},
			{Name: "g:malloc", Samples: 200200}, {Name: "g:malloc__return", Samples: 200200}, {Name: "g:free", Samples: 200264},
			{Name: "g:malloc/stack-1in61/", Stack: true, Samples: 3278},
		}}
	r.summarize(res, &outputFile{})
	for _, want := range []string{
		"faultline: churn ran 16.520 s (user 1.150 s, sys 5.720 s) with 600664 probe hits (36360/s); each hit is a trap into the kernel",
		"faultline: record stopped churn after --duration 5s (SIGINT, as asked): it was killed by SIGINT; exit status 0\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stderr.String())
		}
	}
}

// TestRecordStackSizes checks the stack copies record asks for: without
// --stack-size the shim's cap is the kernel's largest copy (it copies only
// up to the top of the thread's stack) and the kernel's fixed copy is
// smaller; --stack-size sets both.
func TestRecordStackSizes(t *testing.T) {
	env := &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	for _, tc := range []struct {
		args         []string
		shim, kernel uint32
	}{
		{[]string{"ls"}, 65528, 32768},
		{[]string{"--stack-size", "8192", "ls"}, 8192, 8192},
		{[]string{"--stack-size", "65528", "ls"}, 65528, 65528},
	} {
		o, err := parseRecordFlags(env, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		so := (&recorder{opts: o}).stackOptions()
		if so.StackSize != tc.shim || cmp.Or(so.KernelStackSize, so.StackSize) != tc.kernel {
			t.Errorf("%v: shim %d, kernel %d (%+v); want %d, %d", tc.args, so.StackSize, so.KernelStackSize, so, tc.shim, tc.kernel)
		}
	}
}
