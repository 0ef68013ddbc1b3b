package recorder

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/faultline/faultline/cmd/faultline/internal/launch"
)

// The recorded command is started held by a launcher: the shim's (in
// process), or faultline itself with package launch (which see) for the
// protocol both keep. Between record and the launcher runs the guard
// (launch/guard.go): the subreaper of the command's tree, which kills
// what is left of it when record ends or dies. startHeld starts them,
// release lets the launcher exec the command.

// heldCommand is a started launcher waiting to exec the command, under
// its guard.
type heldCommand struct {
	guard   *exec.Cmd
	pid     int      // the launcher's, which becomes the command's
	gate    *os.File // write end of the gate pipe
	control *os.File // write end of the guard's control pipe; nil once closed
	// exited closes when the command has ended, with status and rusage
	// (wait4's) set; statusKnown is false when the guard died first.
	exited      chan struct{}
	status      syscall.WaitStatus
	exitNs      int64 // when the guard saw it end (CLOCK_MONOTONIC ns)
	rusage      syscall.Rusage
	statusKnown bool
	rest        bool          // other processes of the tree were left then
	done        chan struct{} // the guard exited: nothing of the tree is left
	// exits is our end of the socket the launcher sends the exit
	// notification descriptor over (launch.ExitsEnv), or nil.
	exits *os.File
}

// startHeld starts the guard of the launcher for path (resolved) with
// argv: the program launcher names (the shim's, which keeps package
// launch's protocol), or faultline itself when launcher is "" or cannot be
// run (a system without the x86-64 dynamic linker at its standard path, or
// one that forbids running memfds). env holds entries for the command's
// environment; an LD_PRELOAD among them takes effect at the exec only. It
// does not wait for the guard (wait does): the guard's start, a Go
// runtime's, overlaps what record does meanwhile.
//
// With exits the launcher arms the exit notifications (launch.ExitsEnv):
// the shim's launcher and faultline's alike.
func startHeld(launcher, path string, argv []string, noTHP, exits bool, env []string, stdin io.Reader, stdout, stderr io.Writer) (*startingCommand, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding faultline's own executable to launch the command: %w", err)
	}
	mode := launch.Mode
	if noTHP {
		mode = launch.ModeNoTHP
	}
	// The guard and the launcher are faultline: an LD_PRELOAD of record's
	// own environment (a user's allocator, say) is the command's, set at
	// its exec, and not loaded into them. env's comes later and wins.
	cmdEnv := append(preloadAtExec(os.Environ()), launch.Env+"="+mode)
	cmdEnv = append(cmdEnv, preloadAtExec(env)...)
	s := &startingCommand{}
	if exits {
		if s.exits, s.extra = exitsSocket(); s.exits != nil {
			cmdEnv = append(cmdEnv, launch.ExitsEnv+"=1")
		}
	}
	start := func(launcher string) (*guardStart, error) {
		return startGuard(self, launcher, path, argv, cmdEnv, stdin, stdout, stderr, s.extra)
	}
	if launcher != "" {
		if g, err := start(launcher); err == nil {
			s.guard, s.fallback = g, func() (*guardStart, error) { return start(self) }
			return s, nil
		}
	}
	if s.guard, err = start(self); err != nil {
		s.close()
		return nil, fmt.Errorf("starting the launcher: %w", err)
	}
	return s, nil
}

// startingCommand is a guard started, the launcher's pid not yet read.
type startingCommand struct {
	guard *guardStart
	// fallback starts faultline's own launcher where guard's could not
	// run; nil when guard's is faultline's.
	fallback func() (*guardStart, error)
	exits    *os.File   // our end of the exits socket, or nil
	extra    []*os.File // the guard's end of it, while a guard may start
}

// wait reads the launcher's pid from its guard: the command held, ready to
// release, with faultline's own launcher in place of one that could not
// be started.
func (s *startingCommand) wait() (*heldCommand, error) {
	h, err := s.guard.await()
	if err != nil && s.fallback != nil {
		var g *guardStart
		if g, err = s.fallback(); err == nil {
			h, err = g.await()
		}
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("starting the launcher: %w", err)
	}
	for _, f := range s.extra {
		f.Close()
	}
	h.exits = s.exits
	return h, nil
}

// abort stops a launcher that must not run the command.
func (s *startingCommand) abort() {
	if h, err := s.wait(); err == nil {
		h.abort()
	}
}

// close closes the exits socket's ends.
func (s *startingCommand) close() {
	for _, f := range append(s.extra, s.exits) {
		if f != nil {
			f.Close()
		}
	}
}

// preloadAtExec returns env with LD_PRELOAD carried as launch.PreloadEnv,
// which the launcher turns back into LD_PRELOAD at the command's exec.
func preloadAtExec(env []string) []string {
	out := make([]string, len(env))
	for i, e := range env {
		if v, ok := strings.CutPrefix(e, "LD_PRELOAD="); ok {
			e = launch.PreloadEnv + "=" + v
		}
		out[i] = e
	}
	return out
}

// guardStart is a guard started: the launcher's pid comes on report.
type guardStart struct {
	c                     *exec.Cmd
	launcher              string
	gate, control, report *os.File // our ends
}

// startGuard starts the guard (faultline itself, self), which starts the
// launcher with argv[0] as its name, gated by a pipe, with extra as its
// descriptors after the gate.
func startGuard(self, launcher, path string, argv, env []string, stdin io.Reader, stdout, stderr io.Writer, extra []*os.File) (*guardStart, error) {
	var pipes [3][2]*os.File // gate, report, control: read and write ends
	closeAll := func() {
		for _, p := range pipes {
			for _, f := range p {
				if f != nil {
					f.Close()
				}
			}
		}
	}
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, err
		}
		pipes[i] = [2]*os.File{r, w}
	}
	gateR, gateW := pipes[0][0], pipes[0][1]
	reportR, reportW := pipes[1][0], pipes[1][1]
	controlR, controlW := pipes[2][0], pipes[2][1]
	c := exec.Command(self)
	c.Args = append([]string{"faultline-guard", launcher, argv[0], path}, argv...)
	c.Env = append(env, launch.GuardEnv+"="+strconv.Itoa(1+len(extra)))
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	// In the guard: launch.ReportFD, ControlFD, then from GuardExtraFD
	// on what the launcher gets from 3 on: the gate (launch.FD) first.
	c.ExtraFiles = append([]*os.File{reportW, controlR, gateR}, extra...)
	if err := c.Start(); err != nil {
		closeAll()
		return nil, err
	}
	gateR.Close()
	reportW.Close()
	controlR.Close()
	return &guardStart{c: c, launcher: launcher, gate: gateW, control: controlW, report: reportR}, nil
}

// await reads the launcher's pid from the guard: the command held, or why
// the guard could not start the launcher.
func (g *guardStart) await() (*heldCommand, error) {
	c, reportR := g.c, g.report
	h := &heldCommand{guard: c, gate: g.gate, control: g.control, exited: make(chan struct{}), done: make(chan struct{})}
	var b [4]byte
	if _, err := io.ReadFull(reportR, b[:]); err != nil || int32(binary.NativeEndian.Uint32(b[:])) <= 0 {
		reportR.Close()
		g.gate.Close()
		g.control.Close()
		c.Wait()
		if err == nil {
			err = syscall.Errno(-int32(binary.NativeEndian.Uint32(b[:])))
		}
		return nil, fmt.Errorf("starting %s: %w", g.launcher, err)
	}
	h.pid = int(int32(binary.NativeEndian.Uint32(b[:])))
	go func() {
		defer reportR.Close()
		var rep [16 + unsafe.Sizeof(syscall.Rusage{})]byte
		if _, err := io.ReadFull(reportR, rep[:]); err == nil {
			h.status = syscall.WaitStatus(binary.NativeEndian.Uint32(rep[:]))
			h.rest = binary.NativeEndian.Uint32(rep[4:]) != 0
			h.exitNs = int64(binary.NativeEndian.Uint64(rep[8:]))
			h.rusage = *(*syscall.Rusage)(unsafe.Pointer(&rep[16]))
			h.statusKnown = true
		}
		close(h.exited)
	}()
	go func() {
		c.Wait()
		close(h.done)
	}()
	return h, nil
}

// release lets the launcher exec the command.
func (h *heldCommand) release() error {
	_, err := h.gate.Write([]byte{1})
	h.gate.Close()
	return err
}

// signal sends sig to the command.
func (h *heldCommand) signal(sig syscall.Signal) {
	select {
	case <-h.exited:
	default:
		syscall.Kill(h.pid, sig)
	}
}

// treeKillWait bounds how long end waits for the killed tree to be
// reaped: SIGKILL takes a process out at its next return to user mode,
// which one in an uninterruptible sleep (a dead NFS server) may never
// make.
const treeKillWait = 5 * time.Second

// end kills whatever is left of the tree and waits for the guard to have
// reaped it; it reports whether the command itself was still running.
func (h *heldCommand) end() bool {
	running := false
	select {
	case <-h.exited:
	default:
		running = true
	}
	if h.control != nil {
		h.control.Close()
		h.control = nil
	}
	select {
	case <-h.done:
	case <-time.After(treeKillWait):
	}
	return running
}

// abort stops a launcher that must not run the command.
func (h *heldCommand) abort() {
	h.gate.Close() // the launcher exits 127 on EOF
	h.end()
}
