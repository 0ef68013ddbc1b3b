package inject

import (
	"encoding/binary"
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

// callTimeout bounds the injected system call (mmap's takes microseconds).
const callTimeout = 10 * time.Second

// gapSource is the code the injected system call runs, written past the
// end of an executable segment of the target (bytes of the segment's
// last page that nothing executes): the system call, then the thread's
// registers popped from the block restoreBlock leaves below its red zone,
// its flags, and a return to where it was stopped with the stack pointer
// it had. The tracer stops the thread at the system call's exit and
// moves it on; a tracer that dies first (record killed) leaves the thread
// to run on through the restore, as it was. The code stays there after
// (another injection may be running it). TestGapBytes assembles it.
const gapSource = `	.text
	syscall
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rdi
	pop %rsi
	pop %rbp
	pop %rbx
	pop %rdx
	pop %rcx
	pop %rax
	popfq
	ret $128
`

// gapCode is gapSource assembled.
var gapCode = []byte{
	0x0f, 0x05, 0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59,
	0x41, 0x58, 0x5f, 0x5e, 0x5d, 0x5b, 0x5a, 0x59, 0x58, 0x9d, 0xc2, 0x80, 0x00,
}

// restoreBlock is what gapCode pops, in order, and where: below the red
// zone of the interrupted function, the return address at rsp-136 so
// that ret $128 leaves the stack pointer as it was. A system call the
// stop broke off is issued again (resumePoint).
func restoreBlock(r *unix.PtraceRegs) (at uint64, block []byte) {
	rip, rax := resumePoint(r)
	w := []uint64{r.R15, r.R14, r.R13, r.R12, r.R11, r.R10, r.R9, r.R8, r.Rdi, r.Rsi, r.Rbp, r.Rbx, r.Rdx, r.Rcx, rax, r.Eflags, rip}
	block = make([]byte, 8*len(w))
	for i, v := range w {
		binary.NativeEndian.PutUint64(block[8*i:], v)
	}
	return r.Rsp - 136 - 8*uint64(len(w)-1), block
}

// resumePoint is where a thread stopped with registers r runs on from,
// and its rax there: a system call the stop broke off with an
// -ERESTART* code is issued again (the pc moved back onto the syscall
// instruction, rax its number), as the kernel restarts one.
func resumePoint(r *unix.PtraceRegs) (rip, rax uint64) {
	rip, rax = r.Rip, r.Rax
	if int64(r.Orig_rax) >= 0 {
		switch int64(r.Rax) {
		case -512, -513, -514: // -ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND
			rip, rax = rip-2, r.Orig_rax
		case -516: // -ERESTART_RESTARTBLOCK
			rip, rax = rip-2, unix.SYS_RESTART_SYSCALL
		}
	}
	return rip, rax
}

// Steps of syscall, for tests that end the tracer at one.
const (
	stepSet   = iota + 1 // registers set, the thread not yet let go
	stepEntry            // stopped at the system call's entry
	stepExit             // stopped at its exit
)

// testDieAt, set by a test, is called at each step of syscall.
var testDieAt func(step int)

// syscall makes the thread issue system call nr(args...) from gap,
// gapCode there, and returns its result (rax) with the thread stopped
// at the call's exit, its registers those of gapCode past the syscall
// instruction. Signals the thread receives meanwhile are delivered (a
// handler runs first); a stop signal stops it as it would have, until
// it is continued.
func (t *thread) syscall(gap, nr uint64, args ...uint64) (uint64, error) {
	if err := t.write(gap, gapCode); err != nil {
		return 0, fmt.Errorf("writing the system call's code: %w", err)
	}
	sp, block := restoreBlock(&t.regs)
	if err := t.write(sp, block); err != nil {
		return 0, err
	}
	if err := unix.PtraceSetOptions(t.tid, unix.PTRACE_O_TRACESYSGOOD); err != nil {
		return 0, err
	}
	r := t.regs
	a := make([]uint64, 6)
	copy(a, args)
	r.Rdi, r.Rsi, r.Rdx, r.R10, r.R8, r.R9 = a[0], a[1], a[2], a[3], a[4], a[5]
	r.Rax, r.Orig_rax = nr, ^uint64(0) // not in a system call: nothing to restart
	r.Rip, r.Rsp = gap, sp
	if err := unix.PtraceSetRegs(t.tid, &r); err != nil {
		return 0, err
	}
	if testDieAt != nil {
		testDieAt(stepSet)
	}
	if err := unix.PtraceSyscall(t.tid, 0); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(callTimeout)
	for {
		ws, err := t.poll(deadline)
		if err != nil {
			return 0, err
		}
		sig := ws.StopSignal()
		switch {
		case ws.TrapCause() == ptraceEventStop:
			if sig == unix.SIGSTOP || sig == unix.SIGTSTP || sig == unix.SIGTTIN || sig == unix.SIGTTOU {
				// A group stop: stay stopped until continued.
				if _, _, e := unix.Syscall6(unix.SYS_PTRACE, ptraceListen, uintptr(t.tid), 0, 0, 0, 0); e != 0 {
					return 0, e
				}
				deadline = time.Now().Add(callTimeout)
				continue
			}
			sig = 0
		case sig == unix.SIGTRAP|0x80:
			// A system call's entry or exit: ours, or one of a
			// signal handler's.
			var now unix.PtraceRegs
			if err := unix.PtraceGetRegs(t.tid, &now); err != nil {
				return 0, err
			}
			sig = 0
			if now.Rip == gap+2 && now.Rsp == sp && now.Orig_rax == nr {
				if int64(now.Rax) != -int64(unix.ENOSYS) {
					if testDieAt != nil {
						testDieAt(stepExit)
					}
					return now.Rax, nil
				}
				if testDieAt != nil {
					testDieAt(stepEntry)
				}
			}
		default:
			t.signals++
		}
		if err := unix.PtraceSyscall(t.tid, int(sig)); err != nil {
			return 0, err
		}
	}
}
