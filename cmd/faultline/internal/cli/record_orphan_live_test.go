package cli

import (
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

	"github.com/faultline/faultline/cmd/faultline/internal/libc/libctest"
	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

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

// TestRecordLiveFullDisk is issue 23's second repro: the output's
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

// TestRecordLivePidWithoutMaps is issue 23's seventh repro: -p of a
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
