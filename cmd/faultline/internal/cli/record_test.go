package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/libc"
)

// fakeSys is a scripted outside world. Files map to literal contents or
// to real files (for ELF contents); uprobe_events behaves like tracefs:
// "p:"/"r:" lines add a probe, "-:G/E" removes one, EBUSY when in use.
type fakeSys struct {
	euid     int
	files    map[string]string // path → contents
	real     map[string]string // path → real file
	path     map[string]string // LookPath results
	run      map[string]fakeRun
	probes   []string // uprobe_events lines
	busy     map[string]bool
	canMount bool
	mounted  []string
	writes   []string
	env      map[string]string
	chowned  []string
}

type fakeRun struct {
	out, errOut string
	err         error
}

const fakeEvents = "/sys/kernel/tracing/uprobe_events"

func newFakeSys() *fakeSys {
	return &fakeSys{
		files: map[string]string{fakeEvents: ""},
		real:  map[string]string{},
		path:  map[string]string{"perf": "/usr/bin/perf"},
		run: map[string]fakeRun{
			"/usr/bin/perf version": {out: "perf version 6.1.187\n"},
		},
		busy: map[string]bool{},
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
	if path == fakeEvents {
		if _, ok := f.files[path]; !ok {
			return nil, fs.ErrNotExist
		}
		return []byte(strings.Join(f.probes, "\n") + "\n"), nil
	}
	if c, ok := f.files[path]; ok {
		return []byte(c), nil
	}
	if r, ok := f.real[path]; ok {
		return os.ReadFile(r)
	}
	return nil, fs.ErrNotExist
}

type nopFile struct{ *bytes.Reader }

func (nopFile) Close() error { return nil }

func (f *fakeSys) Open(path string) (libc.File, error) {
	if r, ok := f.real[path]; ok {
		return os.Open(r)
	}
	if c, ok := f.files[path]; ok {
		return nopFile{bytes.NewReader([]byte(c))}, nil
	}
	return nil, fs.ErrNotExist
}

func (f *fakeSys) Exists(path string) bool {
	_, a := f.files[path]
	_, b := f.real[path]
	return a || b
}

func (f *fakeSys) Inode(path string) (uint64, error) { return 0, fs.ErrNotExist }
func (f *fakeSys) Getenv(key string) string          { return f.env[key] }
func (f *fakeSys) Geteuid() int                      { return f.euid }

func (f *fakeSys) Chown(path string, uid, gid int) error {
	f.chowned = append(f.chowned, fmt.Sprintf("%s %d:%d", path, uid, gid))
	return nil
}

func (f *fakeSys) MountTracefs(dir string) error {
	if !f.canMount {
		return syscall.EPERM
	}
	f.mounted = append(f.mounted, dir)
	f.files[filepath.Join(dir, "uprobe_events")] = ""
	return nil
}

func (f *fakeSys) AppendLine(path, line string) error {
	if path != fakeEvents {
		return fmt.Errorf("write to %s", path)
	}
	f.writes = append(f.writes, line)
	if name, ok := strings.CutPrefix(line, "-:"); ok {
		for i, p := range f.probes {
			if strings.HasPrefix(p[2:], name+" ") {
				if f.busy[name] {
					return &fs.PathError{Op: "write", Path: path, Err: syscall.EBUSY}
				}
				f.probes = append(f.probes[:i], f.probes[i+1:]...)
				return nil
			}
		}
		return &fs.PathError{Op: "write", Path: path, Err: syscall.ENOENT}
	}
	if !strings.HasPrefix(line, "p:") && !strings.HasPrefix(line, "r:") {
		return &fs.PathError{Op: "write", Path: path, Err: syscall.EINVAL}
	}
	f.probes = append(f.probes, line)
	return nil
}

func newTestRecorder(sys *fakeSys, o *recordOptions) (*recorder, *bytes.Buffer) {
	var errb bytes.Buffer
	if o == nil {
		o = &recordOptions{output: "faultline.data", stackSize: 8192, mmapPages: 1024, cmd: []string{"true"}}
	}
	return &recorder{sys: sys, env: &Env{Stdout: &bytes.Buffer{}, Stderr: &errb}, opts: o, tracefs: "/sys/kernel/tracing", perfPath: "/usr/bin/perf"}, &errb
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
	if o.output != "faultline.data" || o.stackSize != 8192 || o.mmapPages != 1024 || !o.noTHP || o.compress ||
		strings.Join(o.cmd, " ") != "sort -n file" {
		t.Errorf("defaults: %+v", o)
	}
	// Flags after the command belong to it, even without --.
	o, err = parseRecordFlags(env, []string{"-z", "--probe", "free,calloc", "--probe=all", "ls", "-l"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.cmd, " ") != "ls -l" || !o.compress ||
		strings.Join(o.probes, ",") != "calloc,realloc,free,memalign,aligned_alloc,posix_memalign,valloc,pvalloc" {
		t.Errorf("got %+v", o)
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
		{[]string{"-m", "1000", "ls"}, "power of two"},
		{[]string{"--probe", "mmap", "ls"}, `unknown function "mmap"`},
		{[]string{"--duration", "soon", "-a"}, "invalid argument"},
		{[]string{"--frob", "ls"}, "unknown flag"},
	} {
		_, err := parseRecordFlags(env, tc.args)
		if exitCode(err) != ExitFailure || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want exit 2 and %q", tc.args, err, tc.want)
		}
	}
	if o, err := parseRecordFlags(env, []string{"--help"}); o != nil || err != nil || !strings.Contains(env.Stdout.(*bytes.Buffer).String(), "sudo faultline record") {
		t.Errorf("--help: %v %v", o, err)
	}
	// --help after CMD is CMD's.
	if o, err := parseRecordFlags(env, []string{"-q", "sort", "--help"}); err != nil || o == nil || strings.Join(o.cmd, " ") != "sort --help" {
		t.Errorf("sort --help: %+v %v", o, err)
	}
}

// TestGiveToInvoker: under sudo the recording goes to the user who ran
// sudo, so analyze works without sudo.
func TestGiveToInvoker(t *testing.T) {
	for _, tc := range []struct {
		euid int
		env  map[string]string
		want string
	}{
		{0, map[string]string{"SUDO_UID": "1000", "SUDO_GID": "1001"}, "faultline.data 1000:1001"},
		{0, map[string]string{"SUDO_UID": "1000"}, "faultline.data 1000:-1"},
		{0, nil, ""}, // root without sudo
		{0, map[string]string{"SUDO_UID": "0"}, ""},       // sudo from root
		{0, map[string]string{"SUDO_UID": "bob"}, ""},     // not a uid
		{1000, map[string]string{"SUDO_UID": "1000"}, ""}, // not root: perf wrote it as us
	} {
		sys := newFakeSys()
		sys.euid, sys.env = tc.euid, tc.env
		r, _ := newTestRecorder(sys, nil)
		r.giveToInvoker()
		if got := strings.Join(sys.chowned, ","); got != tc.want {
			t.Errorf("euid %d env %v: chowned %q, want %q", tc.euid, tc.env, got, tc.want)
		}
	}
}

func TestPerfRecordArgs(t *testing.T) {
	probes := []probeDef{
		{event: "malloc", stack: true}, {event: "malloc__return"},
		{event: "calloc", stack: true}, {event: "calloc__return"}, {event: "free"},
	}
	for _, tc := range []struct {
		o    recordOptions
		want string
	}{
		{recordOptions{output: "faultline.data", stackSize: 8192, mmapPages: 1024, cmd: []string{"sort", "-o", "out", "in"}},
			"record -c 1 -d --call-graph dwarf,8192 -m 1024 -e faultline:malloc -e faultline:malloc__return/call-graph=no/ " +
				"-e faultline:calloc -e faultline:calloc__return/call-graph=no/ -e faultline:free/call-graph=no/ " +
				"-e page-faults:u -o faultline.data -- sort -o out in"},
		{recordOptions{output: "x.data", stackSize: 4096, mmapPages: 4096, compress: true, pid: 42},
			"record -c 1 -d --call-graph dwarf,4096 -m 4096 -e faultline:malloc -e faultline:malloc__return/call-graph=no/ " +
				"-e faultline:calloc -e faultline:calloc__return/call-graph=no/ -e faultline:free/call-graph=no/ " +
				"-e page-faults:u -o x.data -z -p 42"},
		{recordOptions{output: "a.data", stackSize: 8192, mmapPages: 1024, all: true},
			"record -c 1 -d --call-graph dwarf,8192 -m 1024 -e faultline:malloc -e faultline:malloc__return/call-graph=no/ " +
				"-e faultline:calloc -e faultline:calloc__return/call-graph=no/ -e faultline:free/call-graph=no/ " +
				"-e page-faults:u -o a.data -a"},
	} {
		if got := strings.Join(perfRecordArgs(&tc.o, probes), " "); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

// libcForTest is this machine's libc as ldd (the loader) reports it.
func libcForTest(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ldd", "/bin/true").Output()
	if err != nil {
		t.Skipf("ldd: %v", err)
	}
	m := regexp.MustCompile(`libc\.so\.6 => (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Skip("ldd names no libc.so.6")
	}
	p, err := filepath.EvalSymlinks(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProbeDefinitions(t *testing.T) {
	path := libcForTest(t)
	sys := newFakeSys()
	sys.real["/lib/libc.so.6"] = path
	lib, err := libc.Open(sys, "/lib/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	defs, notes, err := probeDefinitions(sys, "/lib/libc.so.6", []string{"calloc", "free", "memalign", "aligned_alloc", "posix_memalign"})
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
	want := []string{
		fmt.Sprintf("p:faultline/malloc /lib/libc.so.6:%#x size=%%di:u64", off("malloc")),
		fmt.Sprintf("r:faultline/malloc__return /lib/libc.so.6:%#x ptr=$retval hdr=-8($retval):u64", off("malloc")),
		fmt.Sprintf("p:faultline/calloc /lib/libc.so.6:%#x nmemb=%%di:u64 size=%%si:u64", off("__libc_calloc")),
		fmt.Sprintf("r:faultline/calloc__return /lib/libc.so.6:%#x ptr=$retval hdr=-8($retval):u64", off("__libc_calloc")),
		fmt.Sprintf("p:faultline/free /lib/libc.so.6:%#x ptr=%%di:u64", off("free")),
		fmt.Sprintf("p:faultline/memalign /lib/libc.so.6:%#x alignment=%%di:u64 size=%%si:u64", off("memalign")),
		fmt.Sprintf("r:faultline/memalign__return /lib/libc.so.6:%#x ptr=$retval hdr=-8($retval):u64", off("memalign")),
	}
	if off("aligned_alloc") != off("memalign") {
		t.Skip("this libc's aligned_alloc is not memalign; the expectations below assume glibc 2.36")
	}
	want = append(want,
		fmt.Sprintf("p:faultline/posix_memalign /lib/libc.so.6:%#x memptr=%%di:u64 alignment=%%si:u64 size=%%dx:u64", off("posix_memalign")),
		fmt.Sprintf("r:faultline/posix_memalign__return /lib/libc.so.6:%#x ret=$retval:s32", off("posix_memalign")))
	var got []string
	for _, d := range defs {
		got = append(got, d.line)
		if d.stack != (d.event == "malloc" || d.event == "calloc" || d.event == "memalign" || d.event == "posix_memalign") {
			t.Errorf("%s: stack = %v", d.event, d.stack)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "aligned_alloc is the same function as memalign") {
		t.Errorf("notes = %q", notes)
	}
}

func TestCheckPerf(t *testing.T) {
	sys := newFakeSys()
	r, _ := newTestRecorder(sys, nil)
	if err := r.checkPerf(); err != nil || r.perfVersion != "6.1.187" {
		t.Errorf("good perf: %v, version %q", err, r.perfVersion)
	}
	for _, tc := range []struct {
		name  string
		setup func(*fakeSys, *recordOptions)
		want  string
	}{
		{"missing", func(s *fakeSys, o *recordOptions) { delete(s.path, "perf") }, "install it (Debian/Ubuntu: apt-get install linux-perf"},
		{"debian wrapper", func(s *fakeSys, o *recordOptions) {
			s.run["/usr/bin/perf version"] = fakeRun{errOut: "/usr/bin/perf: line 13: exec: perf_6.5: not found\nE: linux-perf-6.5 is not installed.\n", err: errors.New("exit status 1")}
		}, "linux-perf-6.5 is not installed"},
		{"not perf", func(s *fakeSys, o *recordOptions) { s.run["/usr/bin/perf version"] = fakeRun{out: "hello\n"} }, "is it Linux perf"},
		{"old for -z", func(s *fakeSys, o *recordOptions) {
			s.run["/usr/bin/perf version"] = fakeRun{out: "perf version 5.4.0\n"}
			o.compress = true
		}, "drop --compress"},
	} {
		sys := newFakeSys()
		r, _ := newTestRecorder(sys, nil)
		tc.setup(sys, r.opts)
		err := r.checkPerf()
		if exitCode(err) != ExitFailure || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line with %q", tc.name, err, tc.want)
		}
	}
}

func TestCheckPrivileges(t *testing.T) {
	sys := newFakeSys()
	r, _ := newTestRecorder(sys, nil)
	if err := r.checkPrivileges(); err != nil {
		t.Errorf("root: %v", err)
	}
	sys.euid = 1000
	sys.files["/proc/sys/kernel/perf_event_paranoid"] = "2\n"
	err := r.checkPrivileges()
	if exitCode(err) != ExitFailure || !strings.Contains(err.Error(), "sudo faultline record") || !strings.Contains(err.Error(), "perf_event_paranoid is 2") {
		t.Errorf("non-root: %v", err)
	}
}

func TestEnsureTracefs(t *testing.T) {
	sys := newFakeSys()
	r, _ := newTestRecorder(sys, nil)
	if err := r.ensureTracefs(); err != nil || len(sys.mounted) != 0 || r.tracefs != "/sys/kernel/tracing" {
		t.Errorf("mounted already: %v %v", err, sys.mounted)
	}
	// Only the old debugfs location.
	sys = newFakeSys()
	delete(sys.files, fakeEvents)
	sys.files["/sys/kernel/debug/tracing/uprobe_events"] = ""
	r, _ = newTestRecorder(sys, nil)
	if err := r.ensureTracefs(); err != nil || r.tracefs != "/sys/kernel/debug/tracing" {
		t.Errorf("debugfs: %v %s", err, r.tracefs)
	}
	// Not mounted: mount it and say so.
	sys = newFakeSys()
	delete(sys.files, fakeEvents)
	sys.canMount = true
	r, errb := newTestRecorder(sys, nil)
	if err := r.ensureTracefs(); err != nil || strings.Join(sys.mounted, " ") != "/sys/kernel/tracing" || !strings.Contains(errb.String(), "mounted tracefs at /sys/kernel/tracing") {
		t.Errorf("mount: %v %v %q", err, sys.mounted, errb.String())
	}
	// Cannot mount: the error gives the command.
	sys.canMount = false
	delete(sys.files, fakeEvents)
	err := r.ensureTracefs()
	if exitCode(err) != ExitFailure || !strings.Contains(err.Error(), "mount -t tracefs nodev /sys/kernel/tracing") {
		t.Errorf("no mount: %v", err)
	}
}

func TestProbeLifecycle(t *testing.T) {
	others := []string{
		"p:probe_libc/malloc /usr/lib/x86_64-linux-gnu/libc.so.6:0x0000000000098930 size=%di:u64",
		"r:probe_libc/malloc__return /usr/lib/x86_64-linux-gnu/libc.so.6:0x0000000000098930 ptr=$retval",
	}
	defs := []probeDef{
		{event: "malloc", line: "p:faultline/malloc /lib/libc.so.6:0x98930 size=%di:u64", stack: true},
		{event: "malloc__return", line: "r:faultline/malloc__return /lib/libc.so.6:0x98930 ptr=$retval hdr=-8($retval):u64"},
	}

	// A clean run: others' probes untouched, ours added then removed.
	sys := newFakeSys()
	sys.probes = append([]string(nil), others...)
	r, errb := newTestRecorder(sys, nil)
	if err := r.removeStale(); err != nil || errb.Len() != 0 {
		t.Fatalf("removeStale: %v %q", err, errb.String())
	}
	if err := r.addProbes(defs); err != nil {
		t.Fatal(err)
	}
	if len(sys.probes) != 4 {
		t.Errorf("probes after add: %q", sys.probes)
	}
	r.removeProbes()
	r.removeProbes() // the deferred second call is harmless
	if strings.Join(sys.probes, "\n") != strings.Join(others, "\n") {
		t.Errorf("probes after remove: %q", sys.probes)
	}
	if got := strings.Join(sys.writes, "\n"); got != defs[0].line+"\n"+defs[1].line+"\n-:faultline/malloc__return\n-:faultline/malloc" {
		t.Errorf("writes:\n%s", got)
	}

	// Stale probes of a killed run are removed and we say so.
	sys = newFakeSys()
	sys.probes = append(append([]string(nil), others...), defs[0].line, "p:faultline/free /lib/libc.so.6:0x98ef0 ptr=%di:u64")
	r, errb = newTestRecorder(sys, nil)
	if err := r.removeStale(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(sys.probes, "\n") != strings.Join(others, "\n") || !strings.Contains(errb.String(), "removed 2 stale faultline:* probes left by an earlier run (malloc, free); recreating them") {
		t.Errorf("stale: %q, %q", sys.probes, errb.String())
	}

	// In use by another run: stop, touch nothing of its.
	sys = newFakeSys()
	sys.probes = append(append([]string(nil), others...), defs[0].line)
	sys.busy["faultline/malloc"] = true
	r, _ = newTestRecorder(sys, nil)
	err := r.removeStale()
	if exitCode(err) != ExitFailure || !strings.Contains(err.Error(), "another 'faultline record' running") || len(sys.probes) != 3 {
		t.Errorf("busy: %v %q", err, sys.probes)
	}

	// A failed add: what was added is removed by the deferred cleanup.
	sys = newFakeSys()
	r, _ = newTestRecorder(sys, nil)
	bad := append([]probeDef(nil), defs...)
	bad[1].line = "garbage"
	if err := r.addProbes(bad); exitCode(err) != ExitFailure || !strings.Contains(err.Error(), "adding probe faultline:malloc__return") {
		t.Errorf("bad probe: %v", err)
	}
	r.removeProbes()
	if len(sys.probes) != 0 {
		t.Errorf("after failed add: %q", sys.probes)
	}
}

func TestGroupProbes(t *testing.T) {
	text := "p:probe_libc/malloc /lib/libc.so.6:0x1 size=%di:u64\n" +
		"r:faultline/malloc__return /lib/libc.so.6:0x1 ptr=$retval\n" +
		"p:faultline_x/malloc /lib/libc.so.6:0x1\n" +
		"p:faultline/free /lib/libc.so.6:0x2 ptr=%di:u64\n\n"
	if got := strings.Join(groupProbes(text, "faultline"), ","); got != "malloc__return,free" {
		t.Errorf("groupProbes = %s", got)
	}
}

func TestParsePerfStats(t *testing.T) {
	// perf 6.1 `perf report --stats` layout.
	out := `
Aggregated stats:
           TOTAL events:       1200
          SAMPLE events:       1100  (91.7%)
    LOST_SAMPLES events:          3  ( 0.2%)
faultline:malloc stats:
          SAMPLE events:        500
    LOST_SAMPLES events:         25
faultline:malloc__return stats:
          SAMPLE events:        520
page-faults:u stats:
          SAMPLE events:         80
`
	c := parsePerfStats(out)
	if len(c) != 3 || *c["faultline:malloc"] != (eventCounts{500, 25}) || *c["faultline:malloc__return"] != (eventCounts{520, 0}) || *c["page-faults:u"] != (eventCounts{80, 0}) {
		t.Errorf("parsePerfStats: %v", c)
	}
	var b bytes.Buffer
	if !writeLossTable(&b, c) || !strings.Contains(b.String(), "  faultline:malloc              500    25   4.8%\n") {
		t.Errorf("table:\n%s", b.String())
	}
}

// requireLiveRecord skips a test that runs faultline record for real unless
// it can: not -short, root, a perf that runs, tracefs with uprobe_events.
func requireLiveRecord(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("records live; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: adding uprobes needs root")
	}
	if _, err := exec.LookPath("perf"); err != nil {
		t.Skip("no perf in PATH")
	}
	if out, err := exec.Command("perf", "version").CombinedOutput(); err != nil {
		t.Skipf("perf does not run: %v %s", err, out)
	}
	if _, err := os.Stat("/sys/kernel/tracing/uprobe_events"); err != nil {
		t.Skip("no tracefs with uprobe_events at /sys/kernel/tracing")
	}
}

// TestRecordLive records sort on a small file for real. It needs root, perf and tracefs
// with uprobe events, and checks that the probe list is the same after.
func TestRecordLive(t *testing.T) {
	requireLiveRecord(t)
	probeList := func() []string {
		out, err := exec.Command("perf", "probe", "-l").CombinedOutput()
		if err != nil {
			t.Fatalf("perf probe -l: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines
	}
	before := probeList()
	for _, l := range before {
		if strings.HasPrefix(strings.TrimSpace(l), "faultline:") {
			t.Skipf("faultline probes exist already (another record running?): %s", l)
		}
	}
	dir := t.TempDir()
	input := filepath.Join(dir, "in.txt")
	var lines strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&lines, "line %d %d\n", (i*7919)%2000, i)
	}
	os.WriteFile(input, []byte(lines.String()), 0o644)
	out := filepath.Join(dir, "sort.data")
	start := time.Now()
	var stdout, stderr bytes.Buffer
	code := Main([]string{"record", "-o", out, "--probe", "calloc", "--", "sort", "-o", "/dev/null", input}, &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr})
	t.Logf("record took %v; stderr:\n%s", time.Since(start), stderr.String())
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		t.Fatalf("recording: %v", err)
	}
	for _, want := range []string{"faultline:malloc", "page-faults:u", "Next: faultline analyze " + out} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	// Our per-event counts against perf's own.
	stats, err := exec.Command("perf", "report", "--stats", "-i", out).Output()
	if err != nil {
		t.Fatalf("perf report --stats: %v", err)
	}
	want := parsePerfStats(string(stats))
	got, err := countEvents(out)
	if err != nil {
		t.Fatalf("countEvents: %v", err)
	}
	if want["faultline:malloc"] == nil || want["faultline:malloc"].samples == 0 {
		t.Errorf("no malloc samples recorded: perf says %s", stats)
	}
	for name, c := range got {
		w := want[name]
		if w == nil {
			w = &eventCounts{}
		}
		// Samples only: perf counts LOST_SAMPLES records, we the samples
		// they lost.
		if c.samples != w.samples {
			t.Errorf("%s: counted %d samples, perf report --stats says %d", name, c.samples, w.samples)
		}
	}

	after := probeList()
	// Others may add probes while we run; nothing may go missing and
	// nothing of ours may stay.
	have := map[string]bool{}
	for _, l := range after {
		have[l] = true
		if strings.HasPrefix(strings.TrimSpace(l), "faultline:") {
			t.Errorf("probe left behind: %s", l)
		}
	}
	for _, l := range before {
		if !have[l] {
			t.Errorf("probe removed: %s", l)
		}
	}
	if len(after) != len(before) {
		t.Logf("probe list changed by someone else: before %q, after %q", before, after)
	}
}
