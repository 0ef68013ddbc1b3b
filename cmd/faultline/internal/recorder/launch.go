package recorder

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/faultline/faultline/cmd/faultline/internal/launch"
)

// The recorded command is started held by a launcher: the shim's (in
// process), or faultline itself with package launch (which see) for the
// protocol both keep. startHeld starts it, release lets it exec the
// command.

// heldCommand is a started launcher waiting to exec the command.
type heldCommand struct {
	cmd  *exec.Cmd
	gate *os.File // write end of the pipe
	done chan struct{}
	err  error // cmd.Wait's
	// exits is our end of the socket the launcher sends the exit
	// notification descriptor over (launch.ExitsEnv), or nil.
	exits *os.File
}

// startHeld starts the launcher for path (resolved) with argv: the
// program launcher names (the shim's, which keeps package launch's
// protocol), or faultline itself when launcher is "" or cannot be run (a
// system without the x86-64 dynamic linker at its standard path, or one
// that forbids running memfds). env holds entries for the command's
// environment; an LD_PRELOAD among them takes effect at the exec only.
//
// With exits the launcher arms the exit notifications (launch.ExitsEnv):
// faultline's launcher does that, then runs the shim's (launch.ChainEnv).
func startHeld(launcher, path string, argv []string, noTHP, exits bool, env []string, stdin io.Reader, stdout, stderr io.Writer) (*heldCommand, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	mode := launch.Mode
	if noTHP {
		mode = launch.ModeNoTHP
	}
	cmdEnv := append(os.Environ(), launch.Env+"="+mode)
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "LD_PRELOAD="); ok {
			e = launch.PreloadEnv + "=" + v
		}
		cmdEnv = append(cmdEnv, e)
	}
	var extra []*os.File
	var ours *os.File
	if exits {
		if ours, extra = exitsSocket(); ours != nil {
			defer extra[0].Close()
			cmdEnv = append(cmdEnv, launch.ExitsEnv+"=1")
			if launcher != "" {
				cmdEnv = append(cmdEnv, launch.ChainEnv+"="+launcher)
				launcher = ""
			}
		}
	}
	if launcher != "" {
		h, err := startLauncher(launcher, path, argv, cmdEnv, r, w, stdin, stdout, stderr, extra)
		if err == nil {
			return h, nil
		}
	}
	self, err := os.Executable()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("finding faultline's own executable to launch the command: %w", err)
	}
	h, err := startLauncher(self, path, argv, cmdEnv, r, w, stdin, stdout, stderr, extra)
	if err != nil {
		w.Close()
		if ours != nil {
			ours.Close()
		}
		return nil, fmt.Errorf("starting the launcher: %w", err)
	}
	h.exits = ours
	return h, nil
}

// startLauncher starts the launcher self, gated by the pipe r, w.
func startLauncher(self, path string, argv, env []string, r, w *os.File, stdin io.Reader, stdout, stderr io.Writer, extra []*os.File) (*heldCommand, error) {
	c := exec.Command(self, append([]string{path}, argv...)...)
	c.Args[0] = argv[0]
	c.Env = env
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	c.ExtraFiles = append([]*os.File{r}, extra...)
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
		return nil, err
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
