package cli

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// openEventsError explains why the kernel refused record's perf events
// (opening them or their rings), from the errno the recorder wraps: EACCES
// or EPERM is a permission (root in a container without CAP_PERFMON, a
// seccomp profile), EMFILE or ENFILE the open-file limit (one descriptor
// per event per CPU per thread). paranoid is
// /proc/sys/kernel/perf_event_paranoid's value and nofile the soft
// RLIMIT_NOFILE, both as the message shows them. It returns nil for an
// error that is none of these.
func openEventsError(err error, paranoid, nofile string) error {
	if !errors.Is(err, rec.ErrNoEvents) {
		return nil // not the events' (a process's maps unreadable, say)
	}
	switch {
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return prereqError("%v: the kernel does not let this process open perf events (perf_event_paranoid is %s). Root in a container needs CAP_PERFMON or CAP_SYS_ADMIN and a seccomp profile that allows perf_event_open (docker run --cap-add PERFMON, or --privileged); elsewhere run as root: sudo faultline record ...", err, paranoid)
	case errors.Is(err, unix.EMFILE):
		return prereqError("%v: out of file descriptors (ulimit -n is %s); record opens one per event, CPU and thread. Raise the limit (ulimit -n 65536) or record fewer threads", err, nofile)
	case errors.Is(err, unix.ENFILE):
		return prereqError("%v: the system's open-file table is full (fs.file-max); record opens one descriptor per event, CPU and thread. Close other programs or record fewer threads", err)
	case errors.Is(err, rec.ErrNoEvents):
		return prereqError("%v (perf_event_paranoid is %s; is this kernel built with CONFIG_PERF_EVENTS and uprobes?)", err, paranoid)
	}
	return nil
}

// inprocEventsError explains, as openEventsError does, why the kernel
// refused the in-process method's events: those of the recorded program
// alone, which a user may open where perf_event_paranoid is 2 or less
// (the kernel answers EACCES above), in a container too (its user
// namespace's capabilities do not count, the host's setting does), unless
// a seccomp profile refuses the system call (EPERM: container runtimes'
// default profiles allow it only with CAP_PERFMON or CAP_SYS_ADMIN).
func inprocEventsError(err error, paranoid, nofile string) error {
	switch {
	case !errors.Is(err, rec.ErrNoEvents):
		return nil
	case errors.Is(err, unix.EACCES):
		return prereqError("%v: the kernel does not let this user open perf events for its own program (perf_event_paranoid is %s; a user needs 2 or less, in a container too: the host's root sets it with sysctl kernel.perf_event_paranoid=2), or run as root on the host", err, paranoid)
	case errors.Is(err, unix.EPERM):
		return prereqError("%v: perf_event_open was refused, as a seccomp profile refuses it (a container runtime's default profile does without CAP_PERFMON: run the container with --cap-add PERFMON, or a profile that allows perf_event_open); perf_event_paranoid is %s", err, paranoid)
	}
	return openEventsError(err, paranoid, nofile)
}

// nofileLimit is the soft RLIMIT_NOFILE as text ("unknown" when it cannot
// be read).
func nofileLimit() string {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return "unknown"
	}
	if l.Cur == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return fmt.Sprint(l.Cur)
}
