package shim

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/faultline/faultline/cmd/faultline/internal/launch"
)

// launcher writes Object to a memfd and returns the path that runs it, as
// Region.Launcher does.
func launcher(t *testing.T) string {
	t.Helper()
	if !Supported() {
		t.Skip("the shim is x86-64 only")
	}
	f, err := memfd("faultline-shim-test", len(Object))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteAt(Object, 0); err != nil {
		t.Fatal(err)
	}
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(f.Fd()))
}

// launchVia runs the shim's launcher for path with argv and env, sending the
// go byte when gate is true, and returns its standard output, standard
// error and exit status.
func launchVia(t *testing.T, self, path string, argv, env []string, gate bool) (stdout, stderr string, status int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(self, append([]string{path}, argv...)...)
	c.Args[0] = argv[0]
	c.Env = env
	c.ExtraFiles = []*os.File{r}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if gate {
		w.Write([]byte{1})
	}
	w.Close()
	err = c.Wait()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return out.String(), errb.String(), c.ProcessState.ExitCode()
}

// TestLauncherEnv runs the shim's launcher with the environments package
// launch's TestCommandEnv gives the Go launcher, and checks that the
// command (env(1)) sees the same: the markers gone, the carried preload
// as LD_PRELOAD in place of the user's, look-alike names kept.
func TestLauncherEnv(t *testing.T) {
	self := launcher(t)
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env(1) to print the command's environment")
	}
	p := self // a real object to preload, so the dynamic linker says nothing
	for _, c := range []struct{ env, want []string }{
		{[]string{"A=1", launch.Env + "=1", "LD_PRELOAD=" + p}, []string{"A=1", "LD_PRELOAD=" + p}},
		{[]string{"LD_PRELOAD=/u.so", "A=1", launch.PreloadEnv + "=" + p, launch.Env + "=nothp"}, []string{"A=1", "LD_PRELOAD=" + p}},
		{[]string{launch.PreloadEnv + "=" + p, "B="}, []string{"B=", "LD_PRELOAD=" + p}},
		{[]string{launch.Env + "X=1", "LD_PRELOADX=2", launch.Env + "=1"}, []string{launch.Env + "X=1", "LD_PRELOADX=2"}},
	} {
		out, errs, status := launchVia(t, self, envBin, []string{"env"}, c.env, true)
		if status != 0 {
			t.Errorf("env %q: exit %d, stderr %q", c.env, status, errs)
			continue
		}
		if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); !slices.Equal(got, c.want) {
			t.Errorf("env %q: the command saw %q, want %q", c.env, got, c.want)
		}
	}
}

// TestLauncherGate: without the go byte the command never runs (127);
// "nothp" turns transparent huge pages off for it (the kernel's
// THP_enabled in /proc/PID/status); a command that cannot be run is 127
// with a message naming it.
func TestLauncherGate(t *testing.T) {
	self := launcher(t)
	mark := t.TempDir() + "/ran"
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Skip("no touch(1)")
	}
	if _, _, status := launchVia(t, self, touch, []string{"touch", mark}, []string{launch.Env + "=1"}, false); status != 127 {
		t.Errorf("closed gate: exit %d, want 127", status)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("closed gate: the command ran")
	}
	if _, _, status := launchVia(t, self, touch, []string{"touch", mark}, []string{launch.Env + "=1"}, true); status != 0 {
		t.Errorf("open gate: exit %d", status)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("open gate: the command did not run: %v", err)
	}
	grep, err := exec.LookPath("grep")
	if err != nil {
		t.Skip("no grep(1)")
	}
	for mode, want := range map[string]string{launch.ModeNoTHP: "THP_enabled:\t0", launch.Mode: "THP_enabled:\t1"} {
		var prev int
		if mode == launch.Mode {
			// The command inherits this process's setting otherwise.
			if v, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0); err == nil {
				prev = v
			}
			if prev != 0 {
				continue
			}
		}
		out, errs, status := launchVia(t, self, grep, []string{"grep", "THP_enabled", "/proc/self/status"}, []string{launch.Env + "=" + mode}, true)
		if status != 0 && !strings.Contains(errs, "THP") {
			t.Skipf("this kernel's /proc/PID/status has no THP_enabled (grep: %d %q)", status, errs)
		}
		if strings.TrimSpace(out) != want {
			t.Errorf("mode %q: %q, want %q", mode, strings.TrimSpace(out), want)
		}
	}
	_, errs, status := launchVia(t, self, "/nonexistent/cmd", []string{"cmd"}, []string{launch.Env + "=1"}, true)
	if status != 127 || !strings.Contains(errs, "cannot run /nonexistent/cmd") {
		t.Errorf("missing command: exit %d, stderr %q", status, errs)
	}
}

// TestLauncherExits: with launch.ExitsEnv the launcher sends a seccomp
// notification descriptor over descriptor launch.ExitsFD before it waits
// on the gate (as package launch's Go launcher does), and the command's
// exit_group then waits for an answer on it: the notification names the
// command's pid and exit_group (231 on x86-64, <asm/unistd_64.h>), and
// the command exits with its own status once answered. The marker leaves
// the command's environment. Without CAP_SYS_ADMIN no descriptor comes and
// the command runs unstopped.
func TestLauncherExits(t *testing.T) {
	self := launcher(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh(1)")
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "exits"), os.NewFile(uintptr(pair[1]), "exits-launcher")
	defer ours.Close()
	gateR, gateW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(self, sh, "sh", "-c", `echo "[$`+launch.ExitsEnv+`]"; exit 3`)
	c.Args[0] = "sh"
	c.Env = []string{launch.Env + "=1", launch.ExitsEnv + "=1"}
	// Descriptors 3 (the gate) and 4 (launch.ExitsFD).
	c.ExtraFiles = []*os.File{gateR, theirs}
	var out bytes.Buffer
	c.Stdout = &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	gateR.Close()
	theirs.Close()
	listener := receiveFD(t, int(ours.Fd()))
	if listener < 0 && os.Geteuid() == 0 {
		t.Error("no notification descriptor came, running as root")
	}
	gateW.Write([]byte{1})
	gateW.Close()
	if listener >= 0 {
		defer unix.Close(listener)
		// struct seccomp_notif and struct seccomp_notif_resp
		// (seccomp_unotify(2)).
		var nt struct {
			id         uint64
			pid, flags uint32
			nr         int32
			arch       uint32
			ip         uint64
			args       [6]uint64
		}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&nt))); e != 0 {
			t.Fatalf("SECCOMP_IOCTL_NOTIF_RECV: %v", e)
		}
		if int(nt.pid) != c.Process.Pid || nt.nr != 231 || nt.args[0] != 3 {
			t.Errorf("notification: pid %d syscall %d arg %d, want pid %d exit_group (231) of 3", nt.pid, nt.nr, nt.args[0], c.Process.Pid)
		}
		resp := struct {
			id    uint64
			val   int64
			error int32
			flags uint32
		}{id: nt.id, flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp))); e != 0 {
			t.Fatalf("SECCOMP_IOCTL_NOTIF_SEND: %v", e)
		}
	}
	c.Wait()
	if code := c.ProcessState.ExitCode(); code != 3 || out.String() != "[]\n" {
		t.Errorf("the command: exit %d, output %q; want 3 and %q", code, out.String(), "[]\n")
	}
}

// receiveFD returns the descriptor sent over the socket fd (SCM_RIGHTS),
// or -1 when it closes without one or sends nothing for 5 seconds.
func receiveFD(t *testing.T, fd int) int {
	t.Helper()
	// A launcher that neither sends nor closes would hold the test:
	// give up after a while (it waits on the gate meanwhile).
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || oobn == 0 {
		return -1
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages %v: %v", msgs, err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("descriptors %v: %v", fds, err)
	}
	return fds[0]
}
