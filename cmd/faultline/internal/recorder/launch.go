package recorder

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The recorded command is started held: faultline re-executes itself as a
// tiny launcher that waits on a pipe until every event is open, then execs
// the command. The events are opened on the launcher's pid with
// enable_on_exec and inherit, so they switch on exactly at the exec and
// follow every thread and child the command makes (fork and exec keep
// working). A Go program cannot fork without exec, hence the re-exec.
//
// The launcher runs from this package's init, which the Go runtime runs on
// the main thread: exec from another thread would hand the pid to a new
// task and leave the events on the dead one.

// launchEnv marks a launcher process; its value is "1" or "nothp".
const launchEnv = "FAULTLINE_RECORD_LAUNCH"

// preloadEnv carries the LD_PRELOAD value the command is to run with: set
// only at the exec, so the launcher (faultline itself) never loads it.
const preloadEnv = "FAULTLINE_RECORD_PRELOAD"

// launchFD is the pipe the launcher waits on (the first of ExtraFiles).
const launchFD = 3

func init() {
	mode, ok := os.LookupEnv(launchEnv)
	if !ok {
		return
	}
	os.Unsetenv(launchEnv)
	os.Exit(launch(mode, os.Args[1:]))
}

// launch waits for the go byte, then execs args[0] with argv args[1:]. It
// returns only on failure: 127 as a shell would.
func launch(mode string, args []string) int {
	// The command must not outlive record (kill -9, a crash): the kernel
	// sends SIGKILL when the thread that forked us exits, and the setting
	// survives the exec below (not for set-uid or file-capability
	// programs). startHeld keeps that thread alive while we run. Set before
	// the gate is read: if record is already gone the read sees EOF.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "faultline: PR_SET_PDEATHSIG: %v\n", err)
		return 127
	}
	f := os.NewFile(launchFD, "faultline-launch")
	var b [1]byte
	n, _ := f.Read(b[:])
	f.Close()
	if n != 1 || len(args) < 2 {
		// The recorder went away before arming (error or Ctrl-C): do not
		// run the command unrecorded.
		return 127
	}
	if mode == "nothp" {
		// Inherited by children and kept across execve (prctl(2),
		// PR_SET_THP_DISABLE).
		if err := unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0); err != nil {
			fmt.Fprintf(os.Stderr, "faultline: disabling transparent huge pages: %v\n", err)
			return 127
		}
	}
	if v, ok := os.LookupEnv(preloadEnv); ok {
		os.Unsetenv(preloadEnv)
		os.Setenv("LD_PRELOAD", v)
	}
	err := syscall.Exec(args[0], args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "faultline: cannot run %s: %v\n", args[0], err)
	return 127
}

// heldCommand is a started launcher waiting to exec the command.
type heldCommand struct {
	cmd  *exec.Cmd
	gate *os.File // write end of the pipe
	done chan struct{}
	err  error // cmd.Wait's
}

// startHeld starts the launcher for path (resolved) with argv.
// env holds entries for the command's environment; an LD_PRELOAD among
// them takes effect at the exec only.
func startHeld(path string, argv []string, noTHP bool, env []string, stdin io.Reader, stdout, stderr io.Writer) (*heldCommand, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding faultline's own executable to launch the command: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	mode := "1"
	if noTHP {
		mode = "nothp"
	}
	c := exec.Command(self, append([]string{path}, argv...)...)
	c.Args[0] = argv[0]
	c.Env = append(os.Environ(), launchEnv+"="+mode)
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "LD_PRELOAD="); ok {
			e = preloadEnv + "=" + v
		}
		c.Env = append(c.Env, e)
	}
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	c.ExtraFiles = []*os.File{r}
	h := &heldCommand{cmd: c, gate: w, done: make(chan struct{})}
	// The launcher's parent-death signal follows the forking thread, not
	// the process: fork from a locked thread that lives until the command
	// has been waited for, so that only record's own death fires it.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		h.err = c.Wait()
		close(h.done)
	}()
	if err := <-started; err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the launcher: %w", err)
	}
	return h, nil
}

// release lets the launcher exec the command.
func (h *heldCommand) release() error {
	_, err := h.gate.Write([]byte{1})
	h.gate.Close()
	return err
}

// kill ends the released command, and the processes it started, if it
// still runs, and reports whether it did.
func (h *heldCommand) kill() bool {
	select {
	case <-h.done:
		return false
	default:
	}
	killTree(h.cmd.Process.Pid)
	<-h.done
	return true
}

// abort stops a launcher that must not run the command.
func (h *heldCommand) abort() {
	h.gate.Close() // the launcher exits 127 on EOF
	h.cmd.Process.Kill()
	<-h.done
}
