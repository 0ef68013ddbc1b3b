package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/launch"
	"golang.org/x/sys/unix"
)

// adoptOrphans makes this test process the child subreaper of what it
// starts until the test ends (prctl PR_SET_CHILD_SUBREAPER): a process
// record leaves behind becomes this process's child instead of PID 1's,
// so leftChildren can find it.
func adoptOrphans(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
}

// leftChildren lists this process's children that are alive (not
// zombies), reaping the zombies among them.
func leftChildren() []string {
	var left []string
	self := strconv.Itoa(os.Getpid())
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if i < 0 || len(f) < 2 || f[1] != self {
			continue
		}
		pid, _ := strconv.Atoi(e.Name())
		if f[0] == "Z" {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			continue
		}
		left = append(left, e.Name()+" "+string(b[bytes.IndexByte(b, '('):i+1]))
	}
	return left
}

// descendantPids lists the processes below pid, from /proc.
func descendantPids(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if f := strings.Fields(string(b[i+1:])); i >= 0 && len(f) > 1 {
			p, _ := strconv.Atoi(e.Name())
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	in := map[int]bool{pid: true}
	var out []int
	for found := true; found; {
		found = false
		for c, p := range parent {
			if in[p] && !in[c] {
				in[c], found = true, true
				out = append(out, c)
			}
		}
	}
	return out
}

// aliveAfter reports which of pids are alive (not zombies) d after now.
func aliveAfter(pids []int, d time.Duration) []int {
	time.Sleep(d)
	var alive []int
	for _, p := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X' {
			alive = append(alive, p)
		}
	}
	return alive
}

// recordUsers are the users the tree tests run record as: root, and the
// unprivileged fltest where that user exists (the programs and faultline
// are made readable to it).
func recordUsers(t *testing.T, dirs ...string) []*user.User {
	users := []*user.User{{Uid: "0", Gid: "0", Username: "root"}}
	u, err := user.Lookup("fltest")
	if err != nil {
		t.Logf("no user fltest: the tree tests run as root only")
		return users
	}
	for _, d := range dirs {
		for p := d; p != "/" && p != "."; p = filepath.Dir(p) {
			if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
				os.Chmod(p, fi.Mode().Perm()|0o005)
			}
		}
	}
	return append(users, u)
}

// runAs runs c as u.
func runAs(t *testing.T, c *exec.Cmd, u *user.User, dir string) {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid != 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.Env = append(os.Environ(), "HOME="+dir, "PERF_BUILDID_DIR="+filepath.Join(dir, "buildid-cache"))
	}
}

// TestRecordLiveTreeEndsWithRecord: however record ends — SIGKILL,
// SIGTERM, SIGINT sent to it alone — no process of the tree it started
// (the guard, sh, and sh's child churn, a grandchild) is alive 100 ms
// after record has exited, and record leaves no process of its own
// behind (the tracepoints' closer included): this test process adopts
// whatever record leaves (adoptOrphans) and finds nothing.
func TestRecordLiveTreeEndsWithRecord(t *testing.T) {
	progs := requireInproc(t)
	bin := buildFaultline(t)
	adoptOrphans(t)
	for _, u := range recordUsers(t, progs, bin) {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, 0} {
			name := u.Username + "/" + unix.SignalName(sig)
			if sig == 0 {
				name = u.Username + "/exit"
			}
			t.Run(name, func(t *testing.T) {
				dir, err := os.MkdirTemp("", "faultline-tree-")
				if err != nil {
					t.Fatal(err)
				}
				defer os.RemoveAll(dir)
				os.Chmod(dir, 0o755)
				rounds := "50000000"
				if sig == 0 {
					rounds = "100000"
				}
				c := exec.Command(bin, "record", "-q", "-o", filepath.Join(dir, "t.data"), "--", "sh", "-c", filepath.Join(progs, "churn")+" "+rounds+"; true")
				runAs(t, c, u, dir)
				// A file, not a pipe: Wait must not wait for what a
				// leftover process holds open.
				stderr, err := os.CreateTemp(dir, "stderr")
				if err != nil {
					t.Fatal(err)
				}
				defer stderr.Close()
				c.Stderr = stderr
				var tree []int
				if sig != 0 {
					if err := c.Start(); err != nil {
						t.Fatal(err)
					}
					deadline := time.Now().Add(30 * time.Second)
					for !childRuns(c.Process.Pid, "churn") && time.Now().Before(deadline) && len(aliveAfter([]int{c.Process.Pid}, 0)) > 0 {
						time.Sleep(50 * time.Millisecond)
					}
					if !childRuns(c.Process.Pid, "churn") {
						c.Process.Kill()
						c.Wait()
						t.Fatalf("the program did not start under record: %s", readAll(stderr))
					}
					time.Sleep(200 * time.Millisecond)
					tree = descendantPids(c.Process.Pid)
					c.Process.Signal(sig)
					c.Wait()
				} else if err := c.Run(); err != nil {
					t.Fatalf("record: %v: %s", err, readAll(stderr))
				}
				if alive := aliveAfter(tree, 100*time.Millisecond); len(alive) > 0 {
					t.Errorf("processes of the recorded tree alive 100 ms after record exited: %v (stderr %s)", alive, readAll(stderr))
					for _, p := range alive {
						syscall.Kill(p, syscall.SIGKILL)
					}
				}
				if left := leftChildren(); len(left) > 0 {
					t.Errorf("record left processes behind: %v", left)
				}
			})
		}
	}
}

func readAll(f *os.File) string {
	b, _ := os.ReadFile(f.Name())
	return string(b)
}

// TestRecordLiveDaemonFollowed: a command that double-forks a daemon and
// exits: record follows the daemon until it exits (its 20 rounds, about
// 0.2 s), says so, and records every one of its 2000 malloc(5000) calls;
// stopped while it follows, record kills the daemon and says that too.
func TestRecordLiveDaemonFollowed(t *testing.T) {
	progs := requireInproc(t)
	bin := buildFaultline(t)
	adoptOrphans(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "d.data")
	out, err := exec.Command(bin, "record", "-o", data, "--", filepath.Join(progs, "daemon"), "20").CombinedOutput()
	if err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	// The middle process may still be in its exit (held there for its
	// exit snapshot) when record looks: one process or two.
	if !strings.Contains(string(out), "it started still run") || !strings.Contains(string(out), "recorded until") {
		t.Errorf("record did not say it followed the daemon:\n%s", out)
	}
	_, sizes, _ := callCounts(t, data)
	var n uint64
	for _, c := range sizes[5000] {
		n += c
	}
	if n != 2000 {
		t.Errorf("%d malloc(5000) recorded, want the daemon's 2000\n%s", n, out)
	}

	// Stopped while following: the daemon is killed.
	c := exec.Command(bin, "record", "-o", data, "--", filepath.Join(progs, "daemon"), "100000")
	stderr, err := os.CreateTemp(dir, "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var daemon []int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(readAll(stderr), "it started still run") {
			daemon = descendantPids(c.Process.Pid)
			break
		}
	}
	c.Process.Signal(syscall.SIGINT)
	c.Wait()
	if len(daemon) == 0 {
		t.Fatalf("record never said it follows the daemon:\n%s", readAll(stderr))
	}
	if alive := aliveAfter(daemon, 100*time.Millisecond); len(alive) > 0 {
		t.Errorf("the daemon is alive 100 ms after record exited: %v", alive)
		for _, p := range alive {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	if !strings.Contains(readAll(stderr), "then killed") {
		t.Errorf("record did not say it killed the daemon:\n%s", readAll(stderr))
	}
	if left := leftChildren(); len(left) > 0 {
		t.Errorf("record left processes behind: %v", left)
	}
}

// TestRecordLiveRunTimeAfterStall: record stopped (SIGSTOP) for 3 s while
// `sleep 1` runs says the program ran about 1 s, not the 3 s record was
// away: the guard stamps the exit when it happens. (--no-exit-snapshots:
// with them each process waits at its exit for record to read it.)
func TestRecordLiveRunTimeAfterStall(t *testing.T) {
	requireInproc(t)
	bin := buildFaultline(t)
	dir := t.TempDir()
	c := exec.Command(bin, "record", "--no-exit-snapshots", "-o", filepath.Join(dir, "s.data"), "--", "sleep", "1")
	stderr, err := os.CreateTemp(dir, "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitChild(t, c.Process.Pid, "sleep")
	c.Process.Signal(syscall.SIGSTOP)
	time.Sleep(3 * time.Second)
	c.Process.Signal(syscall.SIGCONT)
	if err := c.Wait(); err != nil {
		t.Fatalf("record: %v\n%s", err, readAll(stderr))
	}
	var ran float64
	out := readAll(stderr)
	i := strings.Index(out, "sleep ran ")
	if i < 0 {
		t.Fatalf("no run time in:\n%s", out)
	}
	if _, err := fmt.Sscanf(out[i:], "sleep ran %f s", &ran); err != nil {
		t.Fatal(err)
	}
	if ran < 0.99 || ran > 1.5 {
		t.Errorf("sleep 1 ran %.3f s by record's summary, want about 1 s (record was stopped 3 s)", ran)
	}
}

// TestRecordLiveStoppedRecordHoldsNoExit: with exit snapshots on (root's
// default), record stopped (SIGSTOP) for 3 s while `sleep 1` runs holds
// sleep at its exit for launch.ExitWait at most: the guard answers the
// exit notification when record does not, sleep is gone (its /proc entry
// reaped by the guard) about 1.5 s after it started, not when record
// resumes, and record's summary says the exit went unread and how long
// the processes were held.
func TestRecordLiveStoppedRecordHoldsNoExit(t *testing.T) {
	requireInproc(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: exit snapshots need CAP_SYS_ADMIN")
	}
	bin := buildFaultline(t)
	dir := t.TempDir()
	c := exec.Command(bin, "record", "-o", filepath.Join(dir, "s.data"), "--", "sleep", "1")
	stderr, err := os.CreateTemp(dir, "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitChild(t, c.Process.Pid, "sleep")
	started := time.Now()
	prog := childPid(c.Process.Pid, "sleep")
	c.Process.Signal(syscall.SIGSTOP)
	gone := time.Duration(-1)
	for time.Since(started) < 3*time.Second {
		if _, err := os.Stat("/proc/" + strconv.Itoa(prog)); err != nil {
			gone = time.Since(started)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Until(started.Add(3 * time.Second)))
	c.Process.Signal(syscall.SIGCONT)
	if err := c.Wait(); err != nil {
		t.Fatalf("record: %v\n%s", err, readAll(stderr))
	}
	out := readAll(stderr)
	// sleep 1 ends 1 s after it started; held ExitWait at most; 0.5 s
	// for a loaded machine.
	if limit := time.Second + launch.ExitWait + 500*time.Millisecond; gone < 0 || gone > limit {
		t.Errorf("with record stopped, sleep 1 was gone %v after it started (-1: not within 3 s); want within %v\n%s", gone, limit, out)
	}
	m := regexp.MustCompile(`(\d+) exits went unread: .* processes held at exit ([0-9.]+) ms in all`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("record's summary does not say an exit went unread:\n%s", out)
	}
	if held, _ := strconv.ParseFloat(m[2], 64); m[1] != "1" || held < float64(launch.ExitWait.Milliseconds()) || held > float64(launch.ExitWait.Milliseconds())+200 {
		t.Errorf("want 1 exit unread, held about %v: %s", launch.ExitWait, m[0])
	}
	t.Logf("sleep 1 gone %v after it started, record stopped 3 s; %s", gone, m[0])
}
