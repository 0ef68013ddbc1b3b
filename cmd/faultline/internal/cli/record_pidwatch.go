package cli

import (
	"fmt"
	"os"
	"strings"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
	"golang.org/x/sys/unix"
)

// processExited is the stop request of a -p process that exited: the
// recording ends as for Ctrl-C, and Result.StoppedBy says why.
type processExited struct{ pid int }

func (p processExited) String() string { return fmt.Sprintf("process %d exited", p.pid) }
func (processExited) Signal()          {}

// isProcessExit reports whether a recording stopped because its -p
// process exited (Result.StoppedBy).
func isProcessExit(stoppedBy string, pid int) bool {
	return stoppedBy == processExited{pid}.String()
}

// exitWatch watches a -p process for its exit.
type exitWatch struct {
	pid  int
	comm string // its name when the watch began
	end  func()
}

// watchExit passes sigs on and adds a stop request when process pid
// exits, seen through a pidfd (Linux 5.3+; without one, only sigs).
// Stop ends the watch.
func watchExit(pid int, sigs <-chan os.Signal) (<-chan os.Signal, *exitWatch) {
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	w := &exitWatch{pid: pid, comm: strings.TrimSpace(string(comm)), end: func() {}}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return sigs, w
	}
	c := make(chan os.Signal, 4)
	quit := make(chan struct{})
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			select {
			case s := <-sigs:
				c <- s
				continue
			case <-quit:
				return
			default:
			}
			// The pidfd turns readable when the process exits; a short
			// timeout keeps the signals and quit answered.
			if n, err := unix.Poll(fds, 100); err == nil && n > 0 {
				c <- processExited{pid}
				// Signals still pass until the recording stops.
				for {
					select {
					case s := <-sigs:
						c <- s
					case <-quit:
						return
					}
				}
			}
		}
	}()
	w.end = func() { close(quit) }
	return c, w
}

// watchPid watches -p's process (watchExit); a nil watch without -p.
func (r *recorder) watchPid(sigs <-chan os.Signal) (<-chan os.Signal, *exitWatch) {
	if r.opts.pid <= 0 {
		return sigs, nil
	}
	return watchExit(r.opts.pid, sigs)
}

// stop ends the watch (nil: nothing to end).
func (w *exitWatch) stop() {
	if w != nil {
		w.end()
	}
}

// say tells, when the process's exit ended the recording, what was kept
// and how to follow a restarted service.
func (w *exitWatch) say(r *recorder, res *rec.Result) {
	if w != nil && isProcessExit(res.StoppedBy, w.pid) {
		r.logf("%s", w.note())
	}
}

// note is record's line when the process ended the recording: what was
// kept and how to follow a restarted service.
func (w *exitWatch) note() string {
	name := w.comm
	if name == "" {
		name = "NAME"
	}
	return fmt.Sprintf("process %d (%s) exited, which ended the recording (everything up to its exit is kept); a restarted service has a new pid: record it again, e.g. in a loop: while pid=$(pgrep -xo %s); do faultline record -p \"$pid\" ...; done", w.pid, w.comm, name)
}
