package cli

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
	"github.com/faultline/faultline/perfdata/perftest"
)

// TestOpenEventsError: the command tells a permission refusal from a full
// descriptor table by the errno the recorder wraps (errors shaped as
// recorder.session.open returns them; the recorder's
// TestOpenErrorWrapsErrno makes a real EMFILE), and says what to do for
// each.
func TestOpenEventsError(t *testing.T) {
	opened := func(errno error) error {
		return fmt.Errorf("%w: %s on CPU %d: %w", rec.ErrNoEvents, "page-faults", 3, os.NewSyscallError("perf_event_open", errno))
	}
	for _, c := range []struct {
		name string
		err  error
		want []string // all in the message
		not  []string // none in it
	}{
		{"EACCES", opened(unix.EACCES), []string{"permission denied", "CAP_PERFMON", "perf_event_paranoid is 2"}, []string{"ulimit"}},
		{"EPERM", opened(unix.EPERM), []string{"operation not permitted", "CAP_PERFMON", "seccomp"}, []string{"ulimit"}},
		{"EMFILE", opened(unix.EMFILE), []string{"too many open files", "ulimit -n is 1024", "ulimit -n 65536"}, []string{"CAP_PERFMON"}},
		// A ring's eventfd is not "opening an event", but the limit is the same.
		{"EMFILE ring", fmt.Errorf("%w: mapping a 64-page ring on CPU 0: %w", rec.ErrNoEvents, os.NewSyscallError("eventfd", unix.EMFILE)), []string{"ulimit -n is 1024"}, []string{"CAP_PERFMON"}},
		{"ENFILE", opened(unix.ENFILE), []string{"file-max"}, []string{"CAP_PERFMON", "ulimit -n is"}},
		{"EINVAL", opened(unix.EINVAL), []string{"invalid argument", "CONFIG_PERF_EVENTS"}, []string{"CAP_PERFMON", "ulimit"}},
	} {
		err := openEventsError(c.err, "2", "1024")
		if err == nil {
			t.Errorf("%s: no explanation for %v", c.name, c.err)
			continue
		}
		perftest.CheckText(t, c.name+": the message", err.Error(), c.want, c.not)
	}
	// In-process: the program's own events, refused by perf_event_paranoid
	// (EACCES) or by a seccomp profile (EPERM).
	for _, c := range []struct {
		name      string
		err       error
		want, not []string
	}{
		{"in-process EACCES", opened(unix.EACCES), []string{"perf_event_paranoid is 3", "2 or less", "sysctl kernel.perf_event_paranoid=2"}, []string{"seccomp"}},
		{"in-process EPERM", opened(unix.EPERM), []string{"seccomp", "--cap-add PERFMON", "perf_event_paranoid is 3"}, []string{"sysctl"}},
		{"in-process EMFILE", opened(unix.EMFILE), []string{"ulimit -n is 1024"}, []string{"seccomp", "sysctl"}},
	} {
		err := inprocEventsError(c.err, "3", "1024")
		if err == nil {
			t.Errorf("%s: no explanation for %v", c.name, c.err)
			continue
		}
		perftest.CheckText(t, c.name+": the message", err.Error(), c.want, c.not)
	}
	if err := inprocEventsError(errors.New("the shim did not start"), "2", "1024"); err != nil {
		t.Errorf("an error that is not about events got %v", err)
	}
	// Not the events': an unreadable /proc/PID/maps is EACCES too.
	if err := openEventsError(fmt.Errorf("-p 1: cannot read its memory map: %w", os.ErrPermission), "2", "1024"); err != nil {
		t.Errorf("a refused maps file explained as a perf events refusal: %v", err)
	}
	if err := openEventsError(errors.New("interrupted by interrupt before the program started"), "2", "1024"); err != nil {
		t.Errorf("an error that is not about events got %v", err)
	}
}
