package launch

import (
	"syscall"
	"time"
	"unsafe"
)

// The guard answers the exit notifications (ExitsEnv). The launcher sends
// the notification descriptor to the guard, not to record: the guard
// receives each notification, asks record over the exits socket to read
// the process (an ExitMsg), and lets the call go on when record replies
// with the notification's id, or after ExitWait if it does not (record
// stopped with SIGSTOP, or starved of CPU): a stopped record holds no
// process for longer than that. After each answer it sends record the
// totals so far (an ExitMsg with Pid 0). Record's socket is a
// SOCK_SEQPACKET pair: one message per read; the guard's first message
// is one byte, sent when the launcher armed the filter.

// ExitWait bounds how long a process is held at exit_group for record's
// read of its memory.
const ExitWait = 500 * time.Millisecond

// ExitMsgSize is the size of an ExitMsg on the socket.
const ExitMsgSize = 24

// ExitMsg is one message from the guard to record: a process to read
// (Pid, and the notification's ID record replies with), or, with Pid 0,
// the totals so far: how long processes were held (HeldNs) and how many
// were let go before record replied (Unread).
type ExitMsg struct {
	ID     uint64
	Pid    uint32
	Unread uint32
	HeldNs int64
}

// Marshal lays m out as the socket carries it (native byte order).
func (m ExitMsg) Marshal() []byte {
	b := make([]byte, ExitMsgSize)
	putUint64(b, m.ID)
	putInt32(b[8:], int32(m.Pid))
	putInt32(b[12:], int32(m.Unread))
	putUint64(b[16:], uint64(m.HeldNs))
	return b
}

// ParseExitMsg reads a message Marshal wrote; ok is false for another size.
func ParseExitMsg(b []byte) (m ExitMsg, ok bool) {
	if len(b) != ExitMsgSize {
		return m, false
	}
	return ExitMsg{ID: uint64At(b), Pid: uint32(int32At(b[8:])), Unread: uint32(int32At(b[12:])), HeldNs: int64(uint64At(b[16:]))}, true
}

// The seccomp notification ioctls and the answer's flag, as
// <linux/seccomp.h> defines them (SECCOMP_IOCTL_NOTIF_RECV, _SEND,
// SECCOMP_USER_NOTIF_FLAG_CONTINUE): the package does without
// golang.org/x/sys/unix, whose dependencies would hold its init back
// (launch.go).
const (
	seccompIoctlNotifRecv        = 0xc0502100
	seccompIoctlNotifSend        = 0xc0182101
	seccompUserNotifFlagContinue = 1
)

// The seccomp notification ABI (seccomp_unotify(2)): struct seccomp_notif
// and struct seccomp_notif_resp.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// exitRelay is the guard's half: toRecord is the exits socket record
// holds the other end of; fromLauncher and launcherEnd a socket pair whose
// launcherEnd the launcher gets as ExitsFD.
type exitRelay struct {
	toRecord, fromLauncher, launcherEnd int
}

// newExitRelay makes the launcher's socket; nil if it cannot.
func newExitRelay(toRecord int) *exitRelay {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	syscall.CloseOnExec(toRecord)
	return &exitRelay{toRecord: toRecord, fromLauncher: fds[0], launcherEnd: fds[1]}
}

// run receives the notification descriptor from the launcher and answers
// its notifications until no process holds the filter any more.
func (r *exitRelay) run() {
	defer syscall.Close(r.toRecord)
	listener := r.receive()
	if listener < 0 {
		return // not armed: record sees the socket close
	}
	defer syscall.Close(listener)
	if _, err := syscall.Write(r.toRecord, []byte{1}); err != nil {
		r.toRecord = -1
	}
	var totals ExitMsg
	reply := make([]byte, 8)
	for {
		revents, err := poll(listener, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || revents&pollIn == 0 {
			return // POLLHUP: the last process of the filter is gone
		}
		var nt seccompNotif
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(listener), seccompIoctlNotifRecv, uintptr(unsafe.Pointer(&nt))); e != 0 {
			continue // ENOENT: the process died (a signal) meanwhile
		}
		start := monotonicNs()
		answered := r.ask(ExitMsg{ID: nt.id, Pid: nt.pid}, start, reply)
		resp := seccompNotifResp{id: nt.id, flags: seccompUserNotifFlagContinue}
		syscall.Syscall(syscall.SYS_IOCTL, uintptr(listener), seccompIoctlNotifSend, uintptr(unsafe.Pointer(&resp)))
		totals.HeldNs += monotonicNs() - start
		if !answered {
			totals.Unread++
		}
		if r.toRecord >= 0 {
			syscall.Sendto(r.toRecord, totals.Marshal(), syscall.MSG_DONTWAIT, nil)
		}
	}
}

// receive takes the notification descriptor the launcher sends, or -1
// when it closes the socket without one.
func (r *exitRelay) receive() int {
	defer syscall.Close(r.fromLauncher)
	buf, oob := make([]byte, 1), make([]byte, syscall.CmsgSpace(4))
	for {
		_, oobn, _, _, err := syscall.Recvmsg(r.fromLauncher, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || oobn == 0 {
			return -1
		}
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) == 0 {
			return -1
		}
		fds, err := syscall.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) == 0 {
			return -1
		}
		return fds[0]
	}
}

// ask sends record the process to read and waits, until ExitWait after
// start, for its reply with m.ID; replies to earlier, abandoned ones are
// skipped. It reports whether record replied in time.
func (r *exitRelay) ask(m ExitMsg, start int64, reply []byte) bool {
	if r.toRecord < 0 {
		return false
	}
	if _, err := syscall.Write(r.toRecord, m.Marshal()); err != nil {
		r.toRecord = -1 // record is gone: nothing to wait for
		return false
	}
	for {
		left := int(ExitWait.Milliseconds() - (monotonicNs()-start)/1e6)
		if left <= 0 {
			return false
		}
		revents, err := poll(r.toRecord, left)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || revents == 0 {
			return false
		}
		k, err := syscall.Read(r.toRecord, reply)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || k == 0 {
			r.toRecord = -1
			return false
		}
		if k == 8 && uint64At(reply) == m.ID {
			return true
		}
	}
}

// pollIn is POLLIN of <poll.h>.
const pollIn = 0x1

// poll waits until fd is readable, or hung up, or timeoutMs pass (-1:
// no limit), and returns its revents (0 when the time passed): ppoll(2),
// which every architecture has.
func poll(fd, timeoutMs int) (revents int16, err error) {
	pfd := struct {
		fd             int32
		events, revent int16
	}{fd: int32(fd), events: pollIn}
	var ts *syscall.Timespec
	if timeoutMs >= 0 {
		t := syscall.NsecToTimespec(int64(timeoutMs) * 1e6)
		ts = &t
	}
	n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	if n == 0 {
		return 0, nil
	}
	return pfd.revent, nil
}
