package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/cmd/faultline/internal/libc/libctest"
	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
)

// requireLiveRecord skips a test that records for real unless it can: not
// -short, root, tracefs with uprobe_events. perf is not needed.
func requireLiveRecord(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("records live; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: adding uprobes needs root")
	}
	if _, err := os.Stat("/sys/kernel/tracing/uprobe_events"); err != nil {
		// Not mounted (a machine fresh from boot): mounted as record
		// mounts it, and left mounted as record leaves it.
		(realSystem{}).MountTracefs("/sys/kernel/tracing")
	}
	if _, err := os.Stat("/sys/kernel/tracing/uprobe_events"); err != nil {
		t.Skip("no tracefs with uprobe_events at /sys/kernel/tracing, and mounting it failed")
	}
	// record copies binaries into the build-id cache: the test's own.
	t.Setenv("PERF_BUILDID_DIR", filepath.Join(t.TempDir(), "buildid-cache"))
}

// requirePerf returns perf's path for the checks that compare with it.
func requirePerf(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("perf")
	if err != nil {
		t.Skip("no perf in PATH: the reference counts come from perf")
	}
	if out, err := exec.Command(p, "version").CombinedOutput(); err != nil {
		t.Skipf("perf does not run: %v %s", err, out)
	}
	return p
}

// buildRecordPrograms builds testdata/record/src with its generator, once
// per test process, and returns the directory holding the programs.
func buildRecordPrograms(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc) to build testdata/record/src")
	}
	return buildOnce(t, "record-programs", func(dir string) *exec.Cmd {
		return exec.Command("sh", "../../../../testdata/record/gen.sh", dir)
	})
}

// ourGroup is the probe group record uses inside this test process.
func ourGroup() string { return rec.ProbeGroup(os.Getpid()) }

// addLiveProbes adds defs to the system's tracefs until the test ends.
func addLiveProbes(t *testing.T, defs []rec.UprobeDef) *rec.Uprobes {
	t.Helper()
	tfs, _, err := rec.OpenTracefs(realSystem{})
	if err != nil {
		t.Fatal(err)
	}
	up, err := tfs.AddUprobes(defs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := up.Close(); err != nil {
			t.Error(err)
		}
	})
	return up
}

// uprobeEvents reads the probe list.
func uprobeEvents(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/sys/kernel/tracing/uprobe_events")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkNoProbesLeft fails if this process's group is still in tracefs.
func checkNoProbesLeft(t *testing.T, when string) {
	t.Helper()
	if evs := rec.ParseProbeGroups(uprobeEvents(t))[ourGroup()]; len(evs) > 0 {
		t.Errorf("%s: probes left behind in %s: %v", when, ourGroup(), evs)
	}
}

func runRecordMain(args ...string) (int, string) {
	var stdout, stderr bytes.Buffer
	code := Main(append([]string{"record"}, args...), &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr})
	return code, stderr.String()
}

// countSamples counts SAMPLE records per event name with our reader, and
// the LOST_SAMPLES per event.
func countSamples(t *testing.T, path string) (samples, lost map[string]uint64, total uint64) {
	t.Helper()
	samples, lost = map[string]uint64{}, map[string]uint64{}
	for _, ev := range recordedEvents(t, path) {
		samples[ev.Name] += ev.Samples
		lost[ev.Name] += ev.Lost
		total += ev.Samples
	}
	return samples, lost, total
}

// copyFile copies the file src to dst, executable.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// recordedEvents reads the whole recording at path with our reader and
// returns its events, their sample and loss counts filled in.
func recordedEvents(t *testing.T, path string) []*perfdata.Event {
	t.Helper()
	return readRecording(t, path).Events()
}

// readStats reads the whole recording at path with our reader and returns
// what it counted.
func readStats(t *testing.T, path string) *perfdata.Stats {
	t.Helper()
	return readRecording(t, path).Stats()
}

// readRecording reads the whole recording at path with our reader, in file
// order, failing t on a read error.
func readRecording(t *testing.T, path string) *perfdata.Reader {
	t.Helper()
	rd, err := perfdata.Open(path, &perfdata.Options{Order: perfdata.FileOrder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	for rd.Next() {
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return rd
}

// readStream reads a whole pipe-mode recording (what record -o - wrote)
// with our reader, failing t on a read error; Meta and Stats of the
// drained reader it returns describe the recording.
func readStream(t *testing.T, data []byte) *perfdata.Reader {
	t.Helper()
	rd, err := perfdata.NewStream(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	for rd.Next() {
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("reading back: %v", err)
	}
	return rd
}

// processGone waits up to 5 s for pid to end (gone, or a zombie nobody
// reaped yet).
func processGone(pid int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		// pid (comm) S ...: the state follows the last ')'.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
			return true
		}
	}
	return false
}

// TestRecordLiveChurn checks that record loses no allocator call, on a
// small run: testdata/record/src/churn.c recorded with the defaults and perf
// absent from PATH. The recording loses nothing (perf report --stats, when
// perf is installed), its per-event counts equal `perf stat -e` on the same
// probes for the same deterministic run, and perf script prints as many
// samples as our reader counts.
func TestRecordLiveChurn(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	perfPath, _ := exec.LookPath("perf")
	const iters = "100000"
	out := filepath.Join(t.TempDir(), "churn.data")
	t.Setenv("PATH", "/nonexistent") // no perf (nor anything else) on PATH
	code, stderr := runRecordMain("--method", "uprobe", "-o", out, "--", filepath.Join(progs, "churn"), iters)
	t.Logf("record:\n%s", stderr)
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	checkNoProbesLeft(t, "after a normal exit")
	_, lost, total := countSamples(t, out)
	g := ourGroup()
	// churn: 2 calls per iteration + 2 per 1000, + 64 final frees.
	n, _ := strconv.Atoi(iters)
	if got, min := rangeCount(t, out, g+":malloc"), uint64(n+n/1000); got < min {
		t.Errorf("%s:malloc: %d samples, want at least %d (the program's own calls)", g, got, min)
	}
	for name, l := range lost {
		if l != 0 {
			t.Errorf("%s lost %d samples", name, l)
		}
	}
	if perfPath == "" {
		t.Skip("no perf: the comparison with perf stat and perf script is skipped")
	}
	os.Setenv("PATH", filepath.Dir(perfPath)+":/usr/bin:/bin")

	// perf report --stats: no LOST, no LOST_SAMPLES anywhere.
	stats, err := exec.Command(perfPath, "report", "--stats", "-i", out).CombinedOutput()
	if err != nil {
		t.Fatalf("perf report --stats: %v\n%s", err, stats)
	}
	if strings.Contains(string(stats), "LOST") {
		t.Errorf("perf report --stats shows losses:\n%s", stats)
	}
	// perf script prints every sample our reader counts.
	script, err := exec.Command(perfPath, "script", "-F", "comm,tid,time,event", "-i", out).Output()
	if err != nil {
		t.Fatalf("perf script: %v", err)
	}
	if lines := uint64(bytes.Count(script, []byte("\n"))); lines != total {
		t.Errorf("perf script printed %d samples, our reader counts %d", lines, total)
	}

	// perf buildid-list names the program with the build id readelf
	// reads from its note.
	ids, err := exec.Command(perfPath, "buildid-list", "-i", out).Output()
	if err != nil {
		t.Fatalf("perf buildid-list: %v", err)
	}
	if note, err := exec.Command("readelf", "-n", filepath.Join(progs, "churn")).Output(); err == nil {
		m := regexp.MustCompile(`Build ID: ([0-9a-f]+)`).FindSubmatch(note)
		if m == nil || !strings.Contains(string(ids), string(m[1])+" "+filepath.Join(progs, "churn")) {
			t.Errorf("perf buildid-list does not list churn's build id %s:\n%s", m, ids)
		}
	}

	// perf stat on the same probes (a group of the test's own, same
	// functions, same libc) for the same run.
	statGroup := fmt.Sprintf("fltest_%d", os.Getpid())
	sys := realSystem{}
	r := &recorder{sys: sys, env: &Env{Stderr: os.Stderr}, opts: &recordOptions{quiet: true}, group: statGroup}
	lib, err := r.findLibc(filepath.Join(progs, "churn"))
	if err != nil {
		t.Fatal(err)
	}
	funcs, _ := rec.CanonicalProbes([]string{"all"})
	defs, _, err := rec.UprobeDefinitions(sys, lib, statGroup, funcs)
	if err != nil {
		t.Fatal(err)
	}
	up := addLiveProbes(t, defs)
	var evs []string
	for _, d := range defs {
		evs = append(evs, statGroup+":"+d.Event)
	}
	evs = append(evs, "page-faults:u")
	statOut := filepath.Join(t.TempDir(), "stat.csv")
	cmd := exec.Command(perfPath, "stat", "-x,", "-o", statOut, "-e", strings.Join(evs, ","), "--", filepath.Join(progs, "churn"), iters)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("perf stat: %v\n%s", err, b)
	}
	if err := up.Close(); err != nil {
		t.Error(err)
	}
	csv, _ := os.ReadFile(statOut)
	compared := 0
	for _, line := range strings.Split(string(csv), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 || !strings.HasPrefix(f[2], statGroup+":") {
			continue
		}
		want, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			t.Errorf("perf stat line %q", line)
			continue
		}
		name := g + ":" + strings.TrimPrefix(f[2], statGroup+":")
		// The range instance of each event; the stack instances of malloc
		// share the name and are counted separately below.
		got := rangeCount(t, out, name)
		if got != want {
			t.Errorf("%s: recorded %d, perf stat counted %d", name, got, want)
		}
		t.Logf("%s: recorded %d, perf stat %d", name, got, want)
		compared++
	}
	if compared != len(defs) {
		t.Errorf("compared %d events with perf stat, want %d:\n%s", compared, len(defs), csv)
	}
}

// rangeCount counts the samples of the range instance of name (the attr
// without a user stack).
func rangeCount(t *testing.T, path, name string) uint64 {
	t.Helper()
	var n uint64
	for _, ev := range recordedEvents(t, path) {
		if ev.Name == name && ev.Attr.SampleType&perfdata.SampleStackUser == 0 {
			n += ev.Samples
		}
	}
	return n
}

// TestRecordLiveExitStatus: record exits with the program's status, 128+N
// for a signal, and the recording is complete either way.
func TestRecordLiveExitStatus(t *testing.T) {
	requireLiveRecord(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "x.data")
	code, stderr := runRecordMain("-q", "-o", out, "--", "/bin/sh", "-c", "exit 3")
	if code != 3 || !strings.Contains(stderr, "exited with status 3") {
		t.Errorf("exit 3: record exit %d, stderr %q", code, stderr)
	}
	code, stderr = runRecordMain("-q", "-o", out, "--", "/bin/sh", "-c", "kill -SEGV $$")
	if code != 128+int(syscall.SIGSEGV) || !strings.Contains(stderr, "killed by signal 11 (SIGSEGV)") {
		t.Errorf("SIGSEGV: record exit %d, stderr %q", code, stderr)
	}
	if _, _, total := countSamples(t, out); total == 0 {
		t.Errorf("no samples recorded from the crashed program")
	}
	// ls's own status for a bad flag is 2 (coreutils: "serious trouble").
	code, stderr = runRecordMain("-q", "-o", out, "--", "ls", "--bad-flag")
	if code != 2 || !strings.Contains(stderr, "ls exited with status 2") {
		t.Errorf("ls --bad-flag: record exit %d, stderr %q", code, stderr)
	}
	code, stderr = runRecordMain("-q", "-o", out, "--", "no-such-command-faultline")
	if code != ExitNotFound || !strings.Contains(stderr, "not found") {
		t.Errorf("not found: record exit %d, stderr %q", code, stderr)
	}
	code, stderr = runRecordMain("-q", "-o", out, "--", "/etc/hostname")
	if code != ExitCannotExecute || !strings.Contains(stderr, "cannot execute /etc/hostname") {
		t.Errorf("not executable: record exit %d, stderr %q", code, stderr)
	}
	code, stderr = runRecordMain("-q", "--libc", "/no/such/libc.so.6", "-o", out, "--", "/bin/true")
	if code != ExitRecordFailed || !strings.Contains(stderr, "--libc /no/such/libc.so.6: no such file") {
		t.Errorf("bad --libc: record exit %d, stderr %q", code, stderr)
	}
	checkNoProbesLeft(t, "after the program died")
}

// TestRecordLiveNoWarnings: a default record of a C program (/bin/true)
// prints no warning; -v adds the aliasing detail (glibc 2.36's
// aligned_alloc is memalign).
func TestRecordLiveNoWarnings(t *testing.T) {
	requireLiveRecord(t)
	out := filepath.Join(t.TempDir(), "t.data")
	code, stderr := runRecordMain("-o", out, "--", "/bin/true")
	if code != ExitOK || strings.Contains(stderr, "warning") || strings.Contains(stderr, "same function") {
		t.Errorf("default: exit %d, stderr:\n%s", code, stderr)
	}
	_, notes, err := rec.UprobeDefinitions(realSystem{}, libctest.SystemLibc(t), "g", []string{"memalign", "aligned_alloc"})
	if err != nil || len(notes) == 0 {
		t.Skipf("this libc's aligned_alloc is not memalign (%v)", err)
	}
	code, stderr = runRecordMain("-v", "--method", "uprobe", "-o", out, "--", "/bin/true")
	if code != ExitOK || !strings.Contains(stderr, "faultline: note: aligned_alloc is the same function as memalign") || strings.Contains(stderr, "warning") {
		t.Errorf("-v: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestRecordLiveDuration: a program record stops when --duration elapses
// (SIGINT kills sleep) exits 0, and the summary says record stopped it.
func TestRecordLiveDuration(t *testing.T) {
	requireLiveRecord(t)
	out := filepath.Join(t.TempDir(), "d.data")
	code, stderr := runRecordMain("--duration", "300ms", "-o", out, "--", "sleep", "30")
	if code != ExitOK || !strings.Contains(stderr, "record stopped sleep after --duration 300ms (SIGINT, as asked): it was killed by SIGINT; exit status 0") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	checkNoProbesLeft(t, "after --duration")
}

// TestRecordLiveErrorAndInterrupt: probes are gone after an error that
// happens once they exist, and after Ctrl-C (SIGINT to record, passed on to
// the program), which leaves a complete recording.
func TestRecordLiveErrorAndInterrupt(t *testing.T) {
	requireLiveRecord(t)
	dir := t.TempDir()
	code, stderr := runRecordMain("-q", "-o", filepath.Join(dir, "no", "such", "dir", "x.data"), "--", "/bin/true")
	if code != ExitRecordFailed || !strings.Contains(stderr, "cannot create the output") {
		t.Errorf("error path: exit %d, %q", code, stderr)
	}
	checkNoProbesLeft(t, "after an error")

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP} {
		marker := filepath.Join(dir, "started-"+sig.String())
		out := filepath.Join(dir, "int.data")
		done := make(chan int, 1)
		var errText string
		go func() {
			code, s := runRecordMain("-q", "-o", out, "--", "/bin/sh", "-c", "touch '"+marker+"'; exec sleep 30")
			errText = s
			done <- code
		}()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the recorded program never started")
			}
			time.Sleep(20 * time.Millisecond)
		}
		syscall.Kill(os.Getpid(), sig)
		code := <-done
		if code != 128+int(sig) {
			t.Errorf("%v: exit %d, want %d; %s", sig, code, 128+int(sig), errText)
		}
		if _, _, total := countSamples(t, out); total == 0 {
			t.Errorf("%v: the recording has no samples", sig)
		}
		checkNoProbesLeft(t, "after "+sig.String())
	}
}

// TestRecordLiveFullDisk: the output's
// filesystem fills up (a 2 MiB tmpfs) while the program runs. record exits
// 2 saying the program was killed, the program and the child it started
// are gone, and no temporary file is left.
func TestRecordLiveFullDisk(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	full := filepath.Join(t.TempDir(), "full")
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", full, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("cannot mount a small tmpfs for the full-disk case: %v", err)
	}
	defer syscall.Unmount(full, syscall.MNT_DETACH)
	start := time.Now()
	// 100000 rounds would take minutes and write far more than 2 MiB.
	childFile := filepath.Join(t.TempDir(), "child")
	code, stderr := runRecordMain("-q", "-o", filepath.Join(full, "x.data"), "--", "/bin/sh", "-c",
		"sleep 600 & echo $! > '"+childFile+"'; exec '"+filepath.Join(progs, "rounds")+"' 100000")
	t.Logf("record: exit %d after %v: %s", code, time.Since(start).Round(time.Millisecond), stderr)
	if code != ExitRecordFailed || !strings.Contains(stderr, "no space left on device") || !strings.Contains(stderr, "the program was killed") {
		t.Fatalf("exit %d, %q; want exit %d, no space left, the program was killed", code, stderr, ExitRecordFailed)
	}
	m := regexp.MustCompile(`pid (\d+), SIGKILL`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no pid in %q", stderr)
	}
	pid, _ := strconv.Atoi(m[1])
	if !processGone(pid) {
		t.Errorf("the program (pid %d) still runs", pid)
	}
	b, err := os.ReadFile(childFile)
	if err != nil {
		t.Fatalf("the program's child never started: %v", err)
	}
	if child, _ := strconv.Atoi(strings.TrimSpace(string(b))); !processGone(child) {
		syscall.Kill(child, syscall.SIGKILL)
		t.Errorf("the program's child (pid %d) still runs", child)
	}
	if ents, _ := os.ReadDir(full); len(ents) > 0 {
		t.Errorf("left in the full filesystem: %v", ents)
	}
	checkNoProbesLeft(t, "after the disk filled")
}

// TestRecordLiveKilled: kill -9 of record, with either method, ends the
// program it started (PR_SET_PDEATHSIG) and leaves no file in the output's
// directory (the recording is unnamed until it is complete, O_TMPFILE);
// the uprobe method's probes stay until the next run, which removes them
// and says so.
func TestRecordLiveKilled(t *testing.T) {
	requireLiveRecord(t)
	for _, method := range []string{methodInproc, methodUprobes} {
		t.Run(method, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(t.TempDir(), "pid")
			cmd := exec.Command(os.Args[0], "record", "-q", "--method", method, "-o", filepath.Join(dir, "k.data"), "--",
				"/bin/sh", "-c", "echo $$ > '"+pidFile+".new' && mv '"+pidFile+".new' '"+pidFile+"' && exec sleep 60")
			cmd.Env = append(os.Environ(), "FAULTLINE_CLI_CHILD=1")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pid int
			for deadline := time.Now().Add(20 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
				if b, err := os.ReadFile(pidFile); err == nil {
					pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatal("the recorded program never started")
				}
			}
			group := rec.ProbeGroup(cmd.Process.Pid)
			// The longest of a few reads: one can skip lines (groupEvents).
			var probes []string
			groupEvents(t, group, func(evs []string) bool {
				if len(evs) > len(probes) {
					probes = evs
				}
				return false
			})
			if method == methodUprobes && len(probes) == 0 {
				t.Errorf("no probes of %s while it records", group)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if !processGone(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("the program (pid %d) outlived kill -9 of record", pid)
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Errorf("left in the output's directory after kill -9: %v", ents)
			}
			if method != methodUprobes {
				return
			}
			// The next run is ours unless another user's record started
			// first: it removes a dead run's probes too.
			left, _ := groupEvents(t, group, func(evs []string) bool { return slices.Equal(evs, probes) })
			reaped := len(left) == 0
			if !reaped && !slices.Equal(left, probes) {
				t.Errorf("probes of the killed run: %v, want those it had (%v) until the next run", left, probes)
			}
			code, stderr := runRecordMain("--method", method, "-o", filepath.Join(dir, "next.data"), "--", "/bin/true")
			if code != ExitOK || !reaped && !strings.Contains(stderr, "removed the probes of "+group+", left by a run that was killed") {
				t.Errorf("next run: exit %d, %q", code, stderr)
			}
			if reaped {
				t.Logf("another run removed %s's probes before ours", group)
			}
			if left, ok := groupEvents(t, group, func(evs []string) bool { return len(evs) == 0 }); !ok {
				t.Errorf("the next run left the killed run's probes: %v", left)
			}
		})
	}
}

// TestRemoveStaleLiveWhileOthersRemove: a dead run's probes are all
// removed by the next run even while another process removes probes
// listed before them, which makes a read of uprobe_events skip lines.
// Each trial adds another run's group (fltest_PID) and then a stale one
// (this process's own group, which RemoveStale takes for a dead run whose
// pid was reused), both with record's probes of the system's libc, then
// removes the first group in a goroutine while RemoveStale runs. Before
// RemoveStale removed groups whole and read again, trials left probes of
// the stale group behind.
func TestRemoveStaleLiveWhileOthersRemove(t *testing.T) {
	requireLiveRecord(t)
	lib := libctest.SystemLibc(t)
	tfs, _, err := rec.OpenTracefs(realSystem{})
	if err != nil {
		t.Fatal(err)
	}
	funcs, err := rec.CanonicalProbes([]string{"all"})
	if err != nil {
		t.Fatal(err)
	}
	defs := func(group string) []rec.UprobeDef {
		d, _, err := rec.UprobeDefinitions(realSystem{}, lib, group, funcs)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	other, stale := defs("fltest_"+strconv.Itoa(os.Getpid())), defs(ourGroup())
	// What a failed trial leaves, the next reads remove.
	t.Cleanup(func() {
		for i := 0; i < 5 && len(rec.ParseProbeGroups(uprobeEvents(t))[ourGroup()]) > 0; i++ {
			tfs.RemoveStale()
		}
	})
	const trials = 20
	for i := 0; i < trials; i++ {
		first, err := tfs.AddUprobes(other)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tfs.AddUprobes(stale); err != nil {
			first.Close()
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- first.Close() }()
		_, err = tfs.RemoveStale()
		if cerr := <-done; cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if left, ok := groupEvents(t, ourGroup(), func(evs []string) bool { return len(evs) == 0 }); !ok {
			t.Errorf("trial %d: RemoveStale left %d of the stale group's %d probes: %v", i, len(left), len(stale), left)
			break
		}
	}
	checkNoProbesLeft(t, "after the trials")
}

// TestRecordLiveNewlineLibc checks that a library path with a
// newline is refused and the probe list is unchanged — in particular a
// probe the path would have deleted (a group of this test's own) stays.
func TestRecordLiveNewlineLibc(t *testing.T) {
	requireLiveRecord(t)
	lib := libctest.SystemLibc(t)
	victim := fmt.Sprintf("fltestvictim_%d", os.Getpid())
	sys := realSystem{}
	defs, _, err := rec.UprobeDefinitions(sys, lib, victim, []string{"malloc"})
	if err != nil {
		t.Fatal(err)
	}
	addLiveProbes(t, defs[:1])
	dir := filepath.Join(t.TempDir(), "x\n-:"+victim+"/malloc\n")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(dir, "libc.so.6")
	copyFile(t, lib, evil)
	before := rec.ParseProbeGroups(uprobeEvents(t))
	code, stderr := runRecordMain("-q", "--libc", evil, "-o", filepath.Join(t.TempDir(), "x.data"), "--", "/bin/true")
	if code != ExitRecordFailed || !strings.Contains(stderr, "refusing to write it to uprobe_events") {
		t.Errorf("exit %d, %q", code, stderr)
	}
	after := rec.ParseProbeGroups(uprobeEvents(t))
	if strings.Join(after[victim], ",") != strings.Join(before[victim], ",") || len(after[victim]) != 1 {
		t.Errorf("victim probes before %v, after %v", before[victim], after[victim])
	}
	checkNoProbesLeft(t, "after refusing the path")
}

// TestRecordLivePid records a running process (-p) for a short duration:
// its existing mappings are synthesized (the binary and libc are named
// without the process doing anything new); both ways of -p.
func TestRecordLivePid(t *testing.T) {
	requireLiveRecord(t)
	for _, way := range pidAttachWays {
		t.Run(way, func(t *testing.T) { testRecordLivePid(t, way) })
	}
}

func testRecordLivePid(t *testing.T, way string) {
	cmd := exec.Command("/bin/sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait() // reap it: -count would leave one zombie per run
	}()
	// Wait until the loader has mapped libc (record -p finds it there).
	for i := 0; i < 200; i++ {
		if m, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid)); bytes.Contains(m, []byte("libc")) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := filepath.Join(t.TempDir(), "pid.data")
	code, stderr := runRecordMain("-q", "-o", out, "-p", strconv.Itoa(cmd.Process.Pid), "--attach", way, "--duration", "300ms")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkAttachedWay(t, cmd.Process.Pid, way)
	rd, err := perfdata.Open(out, &perfdata.Options{Order: perfdata.FileOrder})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var names []string
	comm := false
	for rd.Next() {
		switch rec := rd.Record().(type) {
		case *perfdata.Mmap:
			if int(rec.Pid) == cmd.Process.Pid {
				names = append(names, rec.Filename)
			}
		case *perfdata.Comm:
			comm = comm || (int(rec.Pid) == cmd.Process.Pid && rec.Comm == "sleep")
		}
	}
	joined := strings.Join(names, " ")
	if !comm || !strings.Contains(joined, "sleep") || !regexp.MustCompile(`libc[.-]`).MatchString(joined) {
		t.Errorf("synthesized sideband: comm %v, mappings %q", comm, joined)
	}
	checkNoProbesLeft(t, "after -p")
}

// TestRecordLivePidWithoutMaps: -p of a
// process whose /proc/PID/maps cannot be read (pid 1 in this sandbox), or
// of a kernel thread (kthreadd, empty maps), with --libc: record used to
// write an empty recording and exit 0; now it says why and exits 2,
// leaving no file.
func TestRecordLivePidWithoutMaps(t *testing.T) {
	requireLiveRecord(t)
	lib := libctest.SystemLibc(t)
	var cases []struct{ pid, msg string }
	if _, err := os.ReadFile("/proc/1/maps"); err != nil {
		cases = append(cases, struct{ pid, msg string }{"1", "cannot read its memory map"})
	}
	if b, err := os.ReadFile("/proc/2/comm"); err == nil && strings.TrimSpace(string(b)) == "kthreadd" {
		cases = append(cases, struct{ pid, msg string }{"2", "no user-space memory"})
	}
	if len(cases) == 0 {
		t.Skip("here root reads /proc/1/maps and pid 2 is not kthreadd: no process without a readable map to try")
	}
	for _, c := range cases {
		out := filepath.Join(t.TempDir(), "p.data")
		code, stderr := runRecordMain("-q", "-p", c.pid, "--libc", lib, "--duration", "1s", "-o", out)
		if code != ExitRecordFailed || !strings.Contains(stderr, c.msg) {
			t.Errorf("-p %s: exit %d, %q; want exit %d and %q", c.pid, code, stderr, ExitRecordFailed, c.msg)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("-p %s: a recording was written", c.pid)
		}
	}
	checkNoProbesLeft(t, "after -p of a process without a map")
}

// TestRecordLiveSudoOutput checks the output's ownership, live:
// under sudo (SUDO_UID set) with a symlink planted at the output name,
// record writes and chowns only the file it created; with -z and -o - the
// recording arrives on standard output, compressed, and reads back.
func TestRecordLiveSudoOutput(t *testing.T) {
	requireLiveRecord(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.data")
	if err := os.Symlink(target, out); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SUDO_UID", "1000")
	t.Setenv("SUDO_GID", "1000")
	if code, stderr := runRecordMain("-q", "-o", out, "--", "/bin/true"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	st, err := os.Stat(target)
	if err != nil || st.Size() != 0 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("symlink target touched: %v size %d", err, st.Size())
	}
	lst, err := os.Lstat(out)
	if err != nil || !lst.Mode().IsRegular() || lst.Sys().(*syscall.Stat_t).Uid != 1000 || lst.Sys().(*syscall.Stat_t).Gid != 1000 {
		t.Errorf("output: %v %v", err, lst)
	}
	if _, _, total := countSamples(t, out); total == 0 {
		t.Errorf("empty recording")
	}

	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(dir)
	var stdout, stderr bytes.Buffer
	code := Main([]string{"record", "-q", "-z", "-o", "-", "--", "/bin/echo", "hello"}, &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr})
	if code != ExitOK || !strings.Contains(stderr.String(), "hello") {
		t.Fatalf("-o -: exit %d, stderr %q (the program's output goes to stderr)", code, stderr.String())
	}
	if _, err := os.Lstat(filepath.Join(dir, "-")); err == nil {
		t.Errorf("a file named - was created")
	}
	rd := readStream(t, stdout.Bytes())
	if n := rd.Stats().Samples; n == 0 || rd.Meta().Compression.Type != perfdata.CompressZstd || rd.Stats().Compressed == 0 {
		t.Errorf("-z -o -: %d samples, compression %+v", n, rd.Meta().Compression)
	}
}

// TestRecordLivePipeToAnalyze checks, live, that `record -o - |
// analyze -` (both in process, joined by a pipe, analyze reading while
// record writes) gives the very profile (byte for byte) that analyzing the
// same recording as a file gives. The recording is pipe mode, compressed by
// default; perf script reads it from standard input and counts the samples
// faultline's reader counts.
func TestRecordLivePipeToAnalyze(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	dir := t.TempDir()
	fromStream, fromFile := filepath.Join(dir, "stream.pb.gz"), filepath.Join(dir, "file.pb.gz")
	pr, pw := io.Pipe()
	var rec, stderr, analyzeErr bytes.Buffer
	analyzed := make(chan int)
	go func() {
		code := Main([]string{"analyze", "-q", "-", "-o", fromStream}, &Env{Stdin: pr, Stdout: io.Discard, Stderr: &analyzeErr})
		io.Copy(io.Discard, pr) // let record finish if analyze stopped early
		analyzed <- code
	}()
	code := Main([]string{"record", "-q", "-o", "-", "--", filepath.Join(progs, "churn"), "20000"},
		&Env{Stdin: strings.NewReader(""), Stdout: io.MultiWriter(pw, &rec), Stderr: &stderr})
	pw.Close()
	if code != ExitOK {
		t.Fatalf("record -o -: exit %d: %s", code, stderr.String())
	}
	if code := <-analyzed; code != ExitOK {
		t.Fatalf("analyze -: exit %d: %s", code, analyzeErr.String())
	}
	if !bytes.HasPrefix(rec.Bytes(), []byte("PERFILE2\x10\x00\x00\x00\x00\x00\x00\x00")) {
		t.Fatalf("record -o - did not write a pipe-mode header: % x", rec.Bytes()[:min(16, rec.Len())])
	}
	piped := filepath.Join(dir, "piped.data")
	if err := os.WriteFile(piped, rec.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	if code, _, errs := runCLI("analyze", "-q", piped, "-o", fromFile); code != ExitOK {
		t.Fatalf("analyze %s: exit %d: %s", piped, code, errs)
	}
	a, errA := os.ReadFile(fromStream)
	b, errB := os.ReadFile(fromFile)
	if errA != nil || errB != nil || len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("analyze - and analyze FILE differ on one recording (%d and %d bytes; %v %v)", len(a), len(b), errA, errB)
	}

	rd := readStream(t, rec.Bytes())
	samples := rd.Stats().Samples
	if !rd.Meta().PipeMode || rd.Meta().Compression.Type != perfdata.CompressZstd || rd.Stats().Compressed == 0 || samples == 0 {
		t.Fatalf("read back: pipe mode %v, compression %+v, %d samples", rd.Meta().PipeMode, rd.Meta().Compression, samples)
	}
	if len(rd.Meta().BuildIDs) == 0 {
		t.Errorf("no build ids after the data")
	}

	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Log("no perf in PATH: perf script's reading not checked")
		return
	}
	c := exec.Command(perf, "script", "-F", "event", "-i", "-")
	c.Stdin = bytes.NewReader(rec.Bytes())
	out, err := c.Output()
	if err != nil {
		t.Fatalf("perf script -i -: %v", err)
	}
	// One line per sample; perf script 6.1 also prints the stack
	// samples' callchains in a recording with the memory-map calls'
	// tracepoints: tab-indented lines, a blank line after each chain.
	var n uint64
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && !strings.HasPrefix(line, "\t") {
			n++
		}
	}
	// perf prints a packed sample once; our reader delivers the samples
	// it holds.
	if st := rd.Stats(); n != samples-st.Unpacked+st.Packed {
		t.Errorf("perf script -i - printed %d samples, faultline's reader read %d (%d of them from %d packed samples)", n, samples, st.Unpacked, st.Packed)
	}
}

// TestRecordLiveTwoAtOnce runs two records at once, the
// second with --libc naming another copy of the library. Each has its own
// group; the second must not take the first's probes for stale ones, and
// the first records every call of its program. A separate faultline
// binary is built: in-process runs would share the test's pid and so a
// group.
func TestRecordLiveTwoAtOnce(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	dir := t.TempDir()
	bin := buildFaultline(t)
	lib := libctest.SystemLibc(t)
	libCopy := filepath.Join(dir, "libc-copy.so.6")
	copyFile(t, lib, libCopy)
	first := exec.Command(bin, "record", "-q", "--method", "uprobe", "-o", filepath.Join(dir, "first.data"), "--", filepath.Join(progs, "churn"), "30000")
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	group := rec.ProbeGroup(first.Process.Pid)
	// Wait until the first run's probes are in place.
	for i := 0; ; i++ {
		if len(rec.ParseProbeGroups(uprobeEvents(t))[group]) > 0 {
			break
		}
		if i > 1000 {
			first.Process.Kill()
			t.Fatalf("the first record never added its probes: %s", firstErr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	second := exec.Command(bin, "record", "-q", "--libc", libCopy, "-o", filepath.Join(dir, "second.data"), "--", "/bin/true")
	if out, err := second.CombinedOutput(); err != nil {
		t.Errorf("second record: %v\n%s", err, out)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first record: %v\n%s", err, firstErr.String())
	}
	if got, min := rangeCount(t, filepath.Join(dir, "first.data"), group+":malloc"), uint64(30000+30); got < min {
		t.Errorf("first record: %d malloc calls, want at least %d (churn's own)", got, min)
	}
	if evs := rec.ParseProbeGroups(uprobeEvents(t))[group]; len(evs) > 0 {
		t.Errorf("probes left behind: %v", evs)
	}
}

// TestRecordLiveOthersEndMidRun: while one uprobe recording (A) runs,
// other uprobe recordings of the same libc start and end: B is stopped
// with SIGINT (it closes its perf events and removes its probes), C is
// killed with SIGKILL (the kernel closes its events; its probes stay until
// the next run), D, the next run, removes C's probes as stale, and E
// records system-wide for a moment. The kernel keeps one breakpoint per libc
// offset for all of them, so this is where one session ending could
// disarm another's. A records testdata/record/src/phases.c, which waits
// between its two phases until B to E have ended: the calls of both
// phases, all in one process, must be in A's recording (phases.c's
// arithmetic: N1 mallocs of 100 bytes, N2 of 200, N1 + N2 frees), or
// counted lost.
func TestRecordLiveOthersEndMidRun(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	bin := buildFaultline(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const n1, n2 = 2000, 20000
	aData := filepath.Join(dir, "a.data")
	a := exec.Command(bin, "record", "-q", "--method", "uprobe", "-o", aData, "--",
		filepath.Join(progs, "phases"), strconv.Itoa(n1), strconv.Itoa(n2), fifo)
	var aErr bytes.Buffer
	a.Stderr = &aErr
	aOut, err := a.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	aDone := false
	defer func() {
		if !aDone {
			a.Process.Kill()
			a.Wait()
		}
	}()
	// "ready": A's probes are all in place and its first phase is done.
	ready := make(chan error, 1)
	go func() {
		line := make([]byte, 6)
		_, err := io.ReadFull(aOut, line)
		if err == nil && string(line) != "ready\n" {
			err = fmt.Errorf("phases wrote %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("A's program: %v\n%s", err, aErr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("A's program never finished its first phase\n%s", aErr.String())
	}
	aGroup := rec.ProbeGroup(a.Process.Pid)
	aProbes, _ := groupEvents(t, aGroup, func(evs []string) bool { return len(evs) > 0 })
	if len(aProbes) == 0 {
		t.Fatalf("A records, but its group %s is not in tracefs", aGroup)
	}

	// other starts a uprobe recording of a long churn (its program hits
	// the shared breakpoints until it ends) and waits until its probes are
	// in place and its program has had a moment to run.
	other := func(name string) (*exec.Cmd, string) {
		c := exec.Command(bin, "record", "-q", "--method", "uprobe", "-o", filepath.Join(dir, name+".data"), "--",
			filepath.Join(progs, "churn"), "100000000")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		g := rec.ProbeGroup(c.Process.Pid)
		waitForGroup(t, g, c)
		time.Sleep(300 * time.Millisecond)
		return c, g
	}
	b, bGroup := other("b")
	b.Process.Signal(os.Interrupt)
	b.Wait() // 130: record passes the SIGINT on to churn
	if left, ok := groupEvents(t, bGroup, func(evs []string) bool { return len(evs) == 0 }); !ok {
		t.Errorf("B removed its probes at SIGINT, yet %v are left", left)
	}
	c, cGroup := other("c")
	c.Process.Kill()
	c.Wait()
	// C's probes stay until a run removes them: D, or any other record
	// that starts meanwhile (another test, another user).
	d, err := exec.Command(bin, "record", "--method", "uprobe", "-o", filepath.Join(dir, "d.data"), "--", "/bin/true").CombinedOutput()
	if err != nil {
		t.Errorf("D: %v\n%s", err, d)
	}
	t.Logf("D removed C's probes: %v", strings.Contains(string(d), "removed the probes of "+cGroup))
	if left, ok := groupEvents(t, cGroup, func(evs []string) bool { return len(evs) == 0 }); !ok {
		t.Errorf("C's probes after D ran: %v, want none", left)
	}
	// E records system-wide: its probes are armed in every process that
	// maps the libc, A's included, and disarmed everywhere when it ends,
	// but where another session still wants them.
	if e, err := exec.Command(bin, "record", "-q", "--method", "uprobe", "-a", "--duration", "300ms", "-o", filepath.Join(dir, "e.data")).CombinedOutput(); err != nil {
		t.Errorf("E (-a): %v\n%s", err, e)
	}
	if left, ok := groupEvents(t, aGroup, func(evs []string) bool { return slices.Equal(evs, aProbes) }); !ok {
		t.Errorf("A's probes after B to E ended: %v, want %v", left, aProbes)
	}

	release(t, fifo)
	err = a.Wait()
	aDone = true
	if err != nil {
		t.Fatalf("A: %v\n%s", err, aErr.String())
	}
	calls, bySize, _ := callCounts(t, aData)
	_, lost, _ := countSamples(t, aData)
	got := map[string]uint64{"malloc(100)": sum(bySize[100]), "malloc(200)": sum(bySize[200]), "free": calls["free"]}
	want := map[string]uint64{"malloc(100)": n1, "malloc(200)": n2, "free": n1 + n2}
	lostOf := map[string]uint64{"malloc(100)": lost[aGroup+":malloc"], "malloc(200)": lost[aGroup+":malloc"], "free": lost[aGroup+":free"]}
	t.Logf("A recorded %v, counted lost: malloc %d, free %d", got, lost[aGroup+":malloc"], lost[aGroup+":free"])
	for k, w := range want {
		switch g := got[k]; {
		case g > w:
			t.Errorf("%s: %d calls recorded; phases.c makes %d", k, g, w)
		case g+lostOf[k] < w:
			t.Errorf("%s: %d calls recorded and %d counted lost; phases.c makes %d: %d missed without a count", k, g, lostOf[k], w, w-g-lostOf[k])
		}
	}
}

// waitForGroup waits until the probe group of the record cmd is in
// tracefs.
func waitForGroup(t *testing.T, group string, cmd *exec.Cmd) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if len(rec.ParseProbeGroups(uprobeEvents(t))[group]) > 0 {
			return
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("record (pid %d) never added its probes", cmd.Process.Pid)
		}
	}
}

// groupEvents reads group's events from uprobe_events until ok accepts
// them, five reads at most: a read while another process removes probes
// can skip lines that are still there (uprobe_events is a seq_file), and
// other tests may be adding and removing theirs.
func groupEvents(t *testing.T, group string, ok func([]string) bool) ([]string, bool) {
	t.Helper()
	var evs []string
	for try := 0; try < 5; try++ {
		if try > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if evs = rec.ParseProbeGroups(uprobeEvents(t))[group]; ok(evs) {
			return evs, true
		}
	}
	return evs, false
}

// release writes a byte to fifo once its reader (phases.c) has opened it.
func release(t *testing.T, fifo string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			_, err = f.WriteString("g")
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			t.Fatalf("the recorded program never opened %s: %v", fifo, err)
		}
	}
}

// TestRecordLiveFaultStacks: --fault-stacks adds page faults with stacks,
// 1 in --stack-every, beside every fault without one.
func TestRecordLiveFaultStacks(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	out := filepath.Join(t.TempDir(), "f.data")
	if code, stderr := runRecordMain("-q", "--method", "uprobe", "--no-thp", "--fault-stacks", "--stack-every", "100", "-o", out, "--", filepath.Join(progs, "faults"), "2"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The kernel counts a fault it had to retry (FAULT_FLAG_TRIED) as
	// major: the stack instance samples the minor ones.
	var all, minor, stacked, instances uint64
	for _, ev := range recordedEvents(t, out) {
		switch ev.Name {
		case "minor-faults/stack-1in100/":
			stacked += ev.Samples
			instances = uint64(len(ev.IDs))
		case "minor-faults":
			minor += ev.Samples
			all += ev.Samples
		case "major-faults":
			all += ev.Samples
		}
	}
	// faults 2: 2 × 16384 page faults (64 MiB, 4 KiB pages, THP off) plus
	// start-up; the kernel takes every 100th of them again with a stack.
	// Each instance of the event (one per CPU; the program is
	// single-threaded) counts its own period, so each may end up to 99
	// faults short of its next stack: all/100 minus at most one per
	// instance. (Before the twin repair, recorder/twins.go, the kernel's
	// copies made this 32488 faults and 656 stacks.)
	if all < 2*16384 || stacked > minor/100 || stacked+instances < minor/100 {
		t.Errorf("%d faults, %d with stacks from %d instances; want at least %d faults and 1 in 100 of them (less at most one per instance)", all, stacked, instances, 2*16384)
	}
	// The stack instances' own names (…/stack-big/, …/stack-1inN/) are
	// paired with their range events as the old shared names were
	// (TestStackRolesOldNames in attribute/analyze).
	res, err := analyzeFile(&Env{Stderr: io.Discard}, out, defaultAnalyzeOptions(), symbolize.Config{}, true)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	for _, e := range res.Summary.Events {
		roles[e.Name] = e.Role
	}
	g := ourGroup()
	if roles["minor-faults/stack-1in100/"] != "stack" || roles[g+":malloc/stack-big/"] != "stack" || roles[g+":malloc/stack-1in100/"] != "stack" ||
		roles[g+":malloc"] != "alloc-entry" || roles["minor-faults"] != "fault" || roles["major-faults"] != "fault" {
		t.Errorf("analyze's roles: %v", roles)
	}
}

// TestRecordAnalyzeSortLive is the acceptance test of record and analyze
// together: `faultline record -- sort FILE -o /dev/null`, then `faultline
// analyze`. GNU sort reads its input into one buffer it mallocs up front
// (hundreds of MiB for a few MiB of input: it sizes it for the worst case
// and touches only what it uses), so most of sort's page faults must be
// attributed to that buffer's allocation site. The buffer's size comes from
// perf script (the largest size= of a faultline:malloc sample), independent
// of faultline's decoder: record writes each call as a sample of its own
// (--per-call-samples) for perf to read them.
func TestRecordAnalyzeSortLive(t *testing.T) {
	requireLiveRecord(t)
	if _, err := exec.LookPath("sort"); err != nil {
		t.Skip("no sort in PATH")
	}
	dir := t.TempDir()
	input := filepath.Join(dir, "big.txt")
	var b strings.Builder
	for i := range 100000 { // 3.4 MB
		fmt.Fprintf(&b, "%08d line %6d of the input\n", (i*7919)%100000, i)
	}
	if err := os.WriteFile(input, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "sort.data")
	start := time.Now()
	var stdout, stderr bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
	if code := Main([]string{"record", "-q", "--per-call-samples", "-o", data, "--", "sort", input, "-o", "/dev/null"}, env); code != ExitOK {
		t.Fatalf("record: exit %d\n%s", code, stderr.String())
	}
	t.Logf("record took %v:\n%s", time.Since(start).Round(time.Millisecond), stderr.String())

	prof := filepath.Join(dir, "sort.pb.gz")
	stdout.Reset()
	stderr.Reset()
	start = time.Now()
	if code := Main([]string{"analyze", "-o", prof, data}, env); code != ExitOK {
		t.Fatalf("analyze: exit %d\n%s", code, stderr.String())
	}
	t.Logf("analyze took %v:\n%s", time.Since(start).Round(time.Millisecond), stdout.String())
	if !strings.Contains(stdout.String(), "Top allocation sites by faults:") {
		t.Errorf("no site table in the summary")
	}

	// Reference: the largest malloc request, from perf script.
	perf := requirePerf(t)
	script, err := exec.Command(perf, "script", "-i", data, "-F", "event,trace").Output()
	if err != nil {
		t.Fatalf("perf script: %v", err)
	}
	var bufSize int64
	// Either method's spelling: faultline_PID:malloc (uprobes), or
	// faultline:malloc, malloc_short and malloc__call (in-process), and a
	// big one's entry in its stack sample, faultline:malloc/stack-big/.
	sizeRE := regexp.MustCompile(`faultline(?:_\d+)?:malloc(?:_short|__call|/stack-big/)?:.*\bsize=(\d+)`)
	for _, m := range sizeRE.FindAllStringSubmatch(string(script), -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		bufSize = max(bufSize, n)
	}
	if bufSize < int64(b.Len()) {
		t.Fatalf("perf script: largest malloc is %d bytes, smaller than the input (%d): not sort's buffer?", bufSize, b.Len())
	}

	// Per allocation site (leaf location of a by-alloc sample): faults,
	// allocations, bytes.
	p := reporttest.Read(t, prof)
	type site struct{ faults, allocs, bytes int64 }
	sites := map[uint64]*site{}
	var total int64
	for _, s := range p.Sample {
		total += s.Value[0]
		if len(s.Label["class"]) > 0 || len(s.Location) == 0 {
			continue // unattributed
		}
		id := s.Location[0].ID
		if sites[id] == nil {
			sites[id] = &site{}
		}
		sites[id].faults += s.Value[0]
		sites[id].allocs += s.Value[1]
		sites[id].bytes += s.Value[2]
	}
	var top *site
	for _, s := range sites {
		if top == nil || s.faults > top.faults {
			top = s
		}
	}
	if top == nil || total == 0 {
		t.Fatalf("no attributed faults (%d faults)", total)
	}
	t.Logf("faults %d; top site %d faults (%.1f%%), %d allocation(s) of %d bytes; perf script's largest malloc %d bytes",
		total, top.faults, 100*float64(top.faults)/float64(total), top.allocs, top.bytes, bufSize)
	if top.allocs != 1 || top.bytes != bufSize {
		t.Errorf("top site: %d allocations, %d bytes; want sort's buffer, 1 allocation of %d bytes", top.allocs, top.bytes, bufSize)
	}
	// On this 2-core VM about 95% (the rest: loader, libc, locale files).
	if top.faults*10 < total*8 {
		t.Errorf("buffer site has %d of %d faults, want at least 80%%", top.faults, total)
	}
}

// TestRecordLiveBinaryIdentity checks that frames are named from the binary
// that ran: a
// program recorded with the defaults, then rebuilt at the same path with
// other code. The MMAP2 records carry the build ID readelf -n prints for
// the first build; analyze names the first build's site from the build-id
// cache record filled, and with the cache gone names nothing from the
// rebuilt file and says why.
func TestRecordLiveBinaryIdentity(t *testing.T) {
	requireLiveRecord(t)
	for _, tool := range []string{"cc", "readelf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	src, err := filepath.Abs("../../../../testdata/record/src/identity.c")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	app := filepath.Join(dir, "app")
	build := func(extra ...string) {
		t.Helper()
		args := append([]string{"-g", "-O1", "-ffile-prefix-map=" + filepath.Dir(src) + "=/src", "-o", app, src}, extra...)
		if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
			t.Fatalf("cc: %v\n%s", err, out)
		}
	}
	build()
	out, err := exec.Command("readelf", "-n", app).Output()
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(out), "Build ID: ")
	if !ok {
		t.Fatalf("readelf -n: no build ID:\n%s", out)
	}
	want := strings.Fields(after)[0]

	data := filepath.Join(dir, "v1.data")
	if code, stderr := runRecordMain("-q", "-o", data, "--", app); code != ExitOK {
		t.Fatalf("record: exit %d: %s", code, stderr)
	}
	rd, err := perfdata.Open(data, &perfdata.Options{Order: perfdata.FileOrder})
	if err != nil {
		t.Fatal(err)
	}
	var mmapIDs []string
	for rd.Next() {
		if m, ok := rd.Record().(*perfdata.Mmap); ok && m.Filename == app {
			mmapIDs = append(mmapIDs, fmt.Sprintf("%x", m.BuildID))
		}
	}
	var featID string
	for _, b := range rd.Meta().BuildIDs {
		if b.Filename == app {
			featID = b.String()
		}
	}
	rd.Close()
	if len(mmapIDs) == 0 || featID != want {
		t.Errorf("BUILD_ID %q, want %s (readelf -n)", featID, want)
	}
	for _, id := range mmapIDs {
		if id != want {
			t.Errorf("an MMAP2 record of %s has build ID %q, want %s (readelf -n)", app, id, want)
		}
	}

	build("-DREBUILT")
	analyze := func() string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := Main([]string{"analyze", data, "-o", filepath.Join(dir, "p.pb.gz")}, &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr})
		if code != ExitOK {
			t.Fatalf("analyze: exit %d: %s", code, stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	got := analyze()
	if !strings.Contains(got, "make_table identity.c:17") || strings.Contains(got, "rebuilt_buffer") {
		t.Errorf("with the build-id cache: want make_table identity.c:17 (the first build's malloc line), not the rebuilt file's names:\n%s", got)
	}
	t.Setenv("PERF_BUILDID_DIR", filepath.Join(dir, "no-cache"))
	got = analyze()
	if strings.Contains(got, "make_table") || strings.Contains(got, "rebuilt_buffer") || !strings.Contains(got, "frames left unnamed in a binary whose file here is not the one that ran ("+app+")") {
		t.Errorf("without the cache: want no names from the rebuilt file and the reason:\n%s", got)
	}
}
