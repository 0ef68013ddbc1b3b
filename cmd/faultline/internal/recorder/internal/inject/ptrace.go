package inject

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// thread is one thread of the target, seized (PTRACE_SEIZE) and stopped
// (PTRACE_INTERRUPT) by this OS thread, which alone may make its ptrace
// requests (the caller locks it: runtime.LockOSThread).
type thread struct {
	tid   int
	mem   *os.File // /proc/TID/mem
	regs  unix.PtraceRegs
	xsave []byte // the extended state (NT_X86_XSTATE): FPU, SSE, AVX
	// signals are those the thread received while it ran calls: they
	// were delivered as they came (a handler runs on top of the call).
	signals int
}

const (
	ptraceEventStop = 0x80 // PTRACE_EVENT_STOP
	ptraceListen    = 0x4208
	ntX86XState     = 0x202
)

// errGone: the thread or its process ended.
var errGone = errors.New("the process exited")

// seize attaches to tid and stops it (within wait).
func seize(tid int, wait time.Duration) (*thread, error) {
	if err := unix.PtraceSeize(tid); err != nil {
		return nil, err
	}
	t := &thread{tid: tid}
	if err := unix.PtraceInterrupt(tid); err != nil {
		unix.PtraceDetach(tid)
		return nil, err
	}
	if err := t.waitStop(wait); err != nil {
		t.detach()
		return nil, err
	}
	mem, err := os.OpenFile("/proc/"+strconv.Itoa(tid)+"/mem", os.O_RDWR, 0)
	if err != nil {
		t.detach()
		return nil, err
	}
	t.mem = mem
	if err := t.save(); err != nil {
		t.detach()
		return nil, err
	}
	return t, nil
}

// waitStop waits for the interrupt's stop (PTRACE_EVENT_STOP), passing
// on any signal that arrives first.
func (t *thread) waitStop(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		ws, err := t.poll(deadline)
		if err != nil {
			return err
		}
		if ws.TrapCause() == ptraceEventStop {
			return nil
		}
		// A signal-delivery stop: let the signal through, and the
		// interrupt's stop follows.
		t.signals++
		if err := unix.PtraceCont(t.tid, int(ws.StopSignal())); err != nil {
			return err
		}
	}
}

// poll waits for the thread's next stop until deadline: it looks without
// sleeping for the first spin (a short call's end), then every 100 µs.
func (t *thread) poll(deadline time.Time) (unix.WaitStatus, error) {
	var ws unix.WaitStatus
	spin := time.Now().Add(time.Millisecond)
	for {
		pid, err := unix.Wait4(t.tid, &ws, unix.WALL|unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return ws, err
		case pid == t.tid && (ws.Exited() || ws.Signaled()):
			return ws, errGone
		case pid == t.tid && ws.Stopped():
			return ws, nil
		}
		now := time.Now()
		if now.After(deadline) {
			return ws, errTimeout
		}
		if now.Before(spin) {
			runtime.Gosched()
			continue
		}
		time.Sleep(100 * time.Microsecond)
	}
}

var errTimeout = errors.New("timed out")

// save keeps the registers and extended state to put back.
func (t *thread) save() error {
	if err := unix.PtraceGetRegs(t.tid, &t.regs); err != nil {
		return err
	}
	buf := make([]byte, 16<<10)
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETREGSET, uintptr(t.tid), ntX86XState, uintptr(unsafe.Pointer(&iov)), 0, 0); e != 0 {
		return fmt.Errorf("reading the extended registers: %w", e)
	}
	t.xsave = buf[:iov.Len]
	return nil
}

// restore puts back what save kept, exactly: a system call the
// interrupt broke off (orig_rax and an -ERESTART* in rax) is restarted
// by the kernel when the thread resumes.
func (t *thread) restore() error {
	if len(t.xsave) > 0 {
		iov := unix.Iovec{Base: &t.xsave[0]}
		iov.SetLen(len(t.xsave))
		if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SETREGSET, uintptr(t.tid), ntX86XState, uintptr(unsafe.Pointer(&iov)), 0, 0); e != 0 {
			return fmt.Errorf("restoring the extended registers: %w", e)
		}
	}
	return unix.PtraceSetRegs(t.tid, &t.regs)
}

// detach lets the thread run on from its (restored) state.
func (t *thread) detach() {
	unix.PtraceDetach(t.tid)
	if t.mem != nil {
		t.mem.Close()
	}
}

// resume lets the thread run for d, then stops it again.
func (t *thread) resume(d time.Duration) error {
	if err := unix.PtraceCont(t.tid, 0); err != nil {
		return err
	}
	time.Sleep(d)
	if err := unix.PtraceInterrupt(t.tid); err != nil {
		return err
	}
	if err := t.waitStop(time.Second); err != nil {
		return err
	}
	return t.save()
}

func (t *thread) read(addr uint64, b []byte) error {
	_, err := t.mem.ReadAt(b, int64(addr))
	return err
}

func (t *thread) write(addr uint64, b []byte) error {
	_, err := t.mem.WriteAt(b, int64(addr))
	return err
}

// readString reads a NUL-terminated string of at most 512 bytes.
func readString(mem *os.File, addr uint64) string {
	b := make([]byte, 512)
	n, _ := mem.ReadAt(b, int64(addr))
	b = b[:n]
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// callTimeout bounds a call (mmap's takes microseconds).
const callTimeout = 10 * time.Second

// call makes the thread call fn(args...) on its own stack, below the red
// zone, and returns rax. With data, the bytes are written there first
// and the first argument is their address (returned too). The call returns to
// address 0: the fault that follows (SIGSEGV at ip 0) is the end of the
// call, and is never delivered. Signals the thread receives meanwhile are
// delivered (a handler runs on top of the call's frame); a stop signal
// stops it as it would have, until it is continued.
func (t *thread) call(fn uint64, data []byte, args ...uint64) (ret, dataAt uint64, err error) {
	r := t.regs
	sp := r.Rsp - 128 // the red zone of the interrupted function
	if len(data) > 0 {
		sp = (sp - uint64(len(data))) &^ 15
		dataAt = sp
		if err := t.write(sp, data); err != nil {
			return 0, 0, err
		}
		args[0] = dataAt
	}
	sp = sp&^15 - 8
	var zero [8]byte
	if err := t.write(sp, zero[:]); err != nil {
		return 0, 0, err
	}
	for i, a := range args {
		switch i {
		case 0:
			r.Rdi = a
		case 1:
			r.Rsi = a
		case 2:
			r.Rdx = a
		case 3:
			r.Rcx = a
		case 4:
			r.R8 = a
		case 5:
			r.R9 = a
		}
	}
	r.Rsp = sp
	r.Rip = fn
	r.Rax = 0
	r.Orig_rax = ^uint64(0) // not in a system call: nothing to restart
	r.Eflags &^= 0x400      // DF clear, as the ABI wants at a call
	if err := unix.PtraceSetRegs(t.tid, &r); err != nil {
		return 0, 0, err
	}
	if err := unix.PtraceCont(t.tid, 0); err != nil {
		return 0, 0, err
	}
	deadline := time.Now().Add(callTimeout)
	for {
		ws, err := t.poll(deadline)
		if err != nil {
			return 0, 0, err
		}
		sig := ws.StopSignal()
		if ws.TrapCause() == ptraceEventStop {
			if sig == unix.SIGSTOP || sig == unix.SIGTSTP || sig == unix.SIGTTIN || sig == unix.SIGTTOU {
				// A group stop: stay stopped until continued.
				if _, _, e := unix.Syscall6(unix.SYS_PTRACE, ptraceListen, uintptr(t.tid), 0, 0, 0, 0); e != 0 {
					return 0, 0, e
				}
				deadline = time.Now().Add(callTimeout)
				continue
			}
			if err := unix.PtraceCont(t.tid, 0); err != nil {
				return 0, 0, err
			}
			continue
		}
		if sig == unix.SIGSEGV {
			var now unix.PtraceRegs
			if err := unix.PtraceGetRegs(t.tid, &now); err != nil {
				return 0, 0, err
			}
			if now.Rip == 0 && now.Rsp == sp+8 {
				return now.Rax, dataAt, nil
			}
		}
		t.signals++
		if err := unix.PtraceCont(t.tid, int(sig)); err != nil {
			return 0, 0, err
		}
	}
}
