package launch

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// The guard is the process between record and the launcher: faultline
// re-executed with GuardEnv set. It is the child subreaper of the
// recorded command's tree (prctl PR_SET_CHILD_SUBREAPER), so every process
// the command starts stays its descendant, a double-forking daemon
// included; it reports the command's end to record and exits when the
// last of them has; and when record closes the control pipe, or dies
// (kill -9: the pipe's other end closes with it), it kills every one of
// them and then exits. So no process of the tree outlives record, however
// record ends.
//
// Its arguments are the launcher's path, then the launcher's argv; its
// environment's GuardEnv holds how many descriptors, from GuardExtraFD on,
// the launcher gets as its own from 3 on (the gate, FD, first). It writes
// to ReportFD the launcher's pid (int32; minus the errno when it could not
// be started), then, when the launcher (which becomes the command) ends,
// its wait status (int32), whether other processes of the tree were left
// then (int32, 1 or 0), the time it saw it (CLOCK_MONOTONIC ns, int64) and
// rusage (struct rusage); it reads ControlFD: at EOF it kills the
// descendants.
const (
	GuardEnv     = "FAULTLINE_RECORD_GUARD"
	ReportFD     = 3
	ControlFD    = 4
	GuardExtraFD = 5
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of <linux/prctl.h>.
const prSetChildSubreaper = 36

func init() {
	n, ok := syscall.Getenv(GuardEnv)
	if !ok {
		return
	}
	extra, _ := atoi(n)
	os.Exit(guard(os.Args[1:], extra))
}

func guard(args []string, extra int) int {
	if len(args) < 2 {
		return 127
	}
	// A terminal's Ctrl-C reaches the whole foreground group: record
	// decides what it means, so the guard takes it and does nothing (a
	// handled signal is reset to its default at the launcher's exec).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGPIPE)
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		os.Stderr.WriteString("faultline: PR_SET_CHILD_SUBREAPER: " + e.Error() + "\n")
		return 127
	}
	env := make([]string, 0, len(syscall.Environ()))
	for _, e := range syscall.Environ() {
		if !hasPrefix(e, GuardEnv+"=") {
			env = append(env, e)
		}
	}
	// Forked from init, on the main thread, which lives until the guard
	// exits: the launcher's parent-death signal fires with the guard only.
	files := []uintptr{0, 1, 2}
	for i := 0; i < extra; i++ {
		files = append(files, uintptr(GuardExtraFD+i))
	}
	// With the exit notifications armed, the launcher's ExitsFD is a
	// socket to the guard, which answers them (exitrelay.go).
	var relay *exitRelay
	if _, ok := syscall.Getenv(ExitsEnv); ok && len(files) > ExitsFD {
		if relay = newExitRelay(int(files[ExitsFD])); relay != nil {
			files[ExitsFD] = uintptr(relay.launcherEnd)
		}
	}
	pid, err := syscall.ForkExec(args[0], args[1:], &syscall.ProcAttr{Env: env, Files: files})
	var b [4]byte
	if err != nil {
		// record tries another launcher, or says why.
		errno, _ := err.(syscall.Errno)
		putInt32(b[:], -int32(max(errno, 1)))
		syscall.Write(ReportFD, b[:])
		return 127
	}
	for i := 0; i < extra; i++ {
		if relay == nil || GuardExtraFD+i != relay.toRecord {
			syscall.Close(GuardExtraFD + i)
		}
	}
	if relay != nil {
		syscall.Close(relay.launcherEnd)
		go relay.run()
	}
	putInt32(b[:], int32(pid))
	syscall.Write(ReportFD, b[:])
	go watchControl()
	for {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		wpid, err := syscall.Wait4(-1, &ws, 0, &ru)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: the tree is gone
			return 0
		}
		if wpid == pid {
			// The wait status, whether the tree goes on, when
			// (CLOCK_MONOTONIC ns: the guard runs on while record may be
			// stopped), then struct rusage as the kernel lays it out.
			var rep [16 + unsafe.Sizeof(ru)]byte
			putInt32(rep[:], int32(ws))
			if hasChildren() {
				putInt32(rep[4:], 1)
			}
			*(*int64)(unsafe.Pointer(&rep[8])) = monotonicNs()
			copy(rep[16:], unsafe.Slice((*byte)(unsafe.Pointer(&ru)), unsafe.Sizeof(ru)))
			syscall.Write(ReportFD, rep[:])
		}
	}
}

// hasChildren reports whether the guard has a child, running or a zombie
// (waitid(2) with WNOWAIT: nothing is reaped). Once the command has ended,
// every process of its tree that is left is one: orphans are reparented
// to the subreaper, the command's children as it exits.
func hasChildren() bool {
	const pAll = 0     // P_ALL of <sys/wait.h>
	var info [128]byte // siginfo_t
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOHANG|syscall.WNOWAIT|syscall.WALL, 0, 0)
	return e != syscall.ECHILD
}

// watchControl waits on ControlFD: SIGKILL to the tree at EOF (record
// closed the pipe or died).
func watchControl() {
	var b [1]byte
	for {
		n, err := syscall.Read(ControlFD, b[:])
		if err == syscall.EINTR {
			continue
		}
		if n == 1 {
			continue
		}
		// Stop every process first, so none forks past the walk, then
		// kill them; the wait loop reaps them and exits.
		for _, p := range descendants(true) {
			syscall.Kill(p, syscall.SIGKILL)
		}
		return
	}
}

// descendants lists the guard's descendants from /proc; with stop, each
// is stopped (SIGSTOP) as it is found and the walk repeats until it finds
// no new one.
func descendants(stop bool) []int {
	self := os.Getpid()
	in := map[int]bool{self: true}
	var out []int
	for {
		found := false
		for child, parent := range parents() {
			if in[parent] && !in[child] {
				in[child], found = true, true
				out = append(out, child)
				if stop {
					syscall.Kill(child, syscall.SIGSTOP)
				}
			}
		}
		if !found || !stop {
			return out
		}
	}
}

// parents maps every process to its parent, from /proc/PID/stat.
func parents() map[int]int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	m := make(map[int]int, len(names))
	var buf [512]byte
	for _, name := range names {
		pid, ok := atoi(name)
		if !ok {
			continue
		}
		fd, err := syscall.Open("/proc/"+name+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		n, _ := syscall.Read(fd, buf[:])
		syscall.Close(fd)
		// "pid (comm) state ppid ...": comm may hold anything, so read
		// after its last ')'.
		s := string(buf[:max(n, 0)])
		i := len(s) - 1
		for i >= 0 && s[i] != ')' {
			i--
		}
		if i < 0 || i+4 > len(s) {
			continue
		}
		rest := s[i+4:] // past ") S "
		j := 0
		for j < len(rest) && rest[j] != ' ' {
			j++
		}
		if ppid, ok := atoi(rest[:j]); ok {
			m[pid] = ppid
		}
	}
	return m
}

func atoi(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// putInt32, putUint64, int32At and uint64At store and load in native
// byte order (encoding/binary would hold the package's init back:
// launch.go).
func putInt32(b []byte, v int32) {
	_ = b[3]
	*(*int32)(unsafe.Pointer(&b[0])) = v
}

func putUint64(b []byte, v uint64) {
	_ = b[7]
	*(*uint64)(unsafe.Pointer(&b[0])) = v
}

func int32At(b []byte) int32 {
	_ = b[3]
	return *(*int32)(unsafe.Pointer(&b[0]))
}

func uint64At(b []byte) uint64 {
	_ = b[7]
	return *(*uint64)(unsafe.Pointer(&b[0]))
}

// monotonicNs reads CLOCK_MONOTONIC (clock_gettime(2); the syscall
// package has no wrapper).
func monotonicNs() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
