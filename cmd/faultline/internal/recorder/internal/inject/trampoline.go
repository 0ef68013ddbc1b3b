package inject

import (
	"encoding/binary"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The trampoline is the code an injected thread runs on its own, in a page
// of the target's that one injected mmap system call made: it calls
// __errno_location and keeps errno, dlopen(path, RTLD_NOW) and dlsym(handle,
// symbol) (or the entry given), then the entry with the page's argument
// area, keeps what it returned, puts back errno, the extended state
// (xrstor of the copy ptrace read; AMX's tile state, which none of these
// calls touch, left out of the mask), and last the flags and every
// general-purpose register, and jumps to where the thread was stopped. A
// system call the stop broke off is issued again by that jump (its pc is
// moved back onto the syscall instruction and rax holds its number), as
// the kernel restarts one. Nothing in it needs record: record can be
// killed at any moment after the thread runs it.
//
// The page's layout: the code at 0, the block of words below at
// blockOff, the path at pathOff, the symbol at symOff, the argument at
// argOff, the extended state at xstateOff (64-byte aligned, as xrstor
// wants).
const (
	blockOff  = 0x300
	pathOff   = 0x400
	symOff    = 0x600
	argOff    = 0x700
	xstateOff = 0x1000

	// ArgSize is the room for the argument the entry is called with.
	ArgSize = 0x100
)

// The block's words, by index (the labels of trampolineSource).
const (
	wDone   = iota // 1 once the thread is about to leave the page
	wStatus        // statusFailed: dlopen or dlsym failed; statusReturned
	wResult        // the entry's return value, or dlerror's message
	wErrnoP
	wErrnoV
	wEntry // the entry's address; 0: dlopen path, dlsym symbol
	wErrnoFn
	wDlopen
	wDlsym
	wDlerror
	wFlags
	wRip
	wRsp
	wRax
	wRbx
	wRcx
	wRdx
	wRsi
	wRdi
	wRbp
	wR8
	wR9
	wR10
	wR11
	wR12
	wR13
	wR14
	wR15
	nWords
)

const (
	statusFailed   = 1
	statusReturned = 2
)

// trampolineSource is the trampoline in the GNU assembler's syntax;
// TestTrampolineBytes assembles it (as --64) and checks trampolineCode.
const trampolineSource = `	.text
start:
	call *f_errno(%rip)
	mov %rax, errnop(%rip)
	mov (%rax), %ecx
	mov %rcx, errnov(%rip)
	mov entry(%rip), %rax
	test %rax, %rax
	jnz 1f
	lea path(%rip), %rdi
	mov $2, %esi
	call *f_dlopen(%rip)
	test %rax, %rax
	jz 2f
	mov %rax, %rdi
	lea sym(%rip), %rsi
	call *f_dlsym(%rip)
	test %rax, %rax
	jz 2f
1:	lea arg(%rip), %rdi
	call *%rax
	mov %rax, result(%rip)
	movq $2, status(%rip)
	jmp 3f
2:	call *f_dlerror(%rip)
	mov %rax, result(%rip)
	movq $1, status(%rip)
3:	mov errnop(%rip), %rax
	mov errnov(%rip), %rcx
	mov %ecx, (%rax)
	xor %ecx, %ecx
	xgetbv
	and $0xfff9ffff, %eax
	xrstor xstate(%rip)
	movq $1, done(%rip)
	push r_flags(%rip)
	popfq
	mov r_rax(%rip), %rax
	mov r_rbx(%rip), %rbx
	mov r_rcx(%rip), %rcx
	mov r_rdx(%rip), %rdx
	mov r_rsi(%rip), %rsi
	mov r_rdi(%rip), %rdi
	mov r_rbp(%rip), %rbp
	mov r_r8(%rip), %r8
	mov r_r9(%rip), %r9
	mov r_r10(%rip), %r10
	mov r_r11(%rip), %r11
	mov r_r12(%rip), %r12
	mov r_r13(%rip), %r13
	mov r_r14(%rip), %r14
	mov r_r15(%rip), %r15
	mov r_rsp(%rip), %rsp
	jmp *r_rip(%rip)
	.org 0x300
done: .quad 0
status: .quad 0
result: .quad 0
errnop: .quad 0
errnov: .quad 0
entry: .quad 0
f_errno: .quad 0
f_dlopen: .quad 0
f_dlsym: .quad 0
f_dlerror: .quad 0
r_flags: .quad 0
r_rip: .quad 0
r_rsp: .quad 0
r_rax: .quad 0
r_rbx: .quad 0
r_rcx: .quad 0
r_rdx: .quad 0
r_rsi: .quad 0
r_rdi: .quad 0
r_rbp: .quad 0
r_r8: .quad 0
r_r9: .quad 0
r_r10: .quad 0
r_r11: .quad 0
r_r12: .quad 0
r_r13: .quad 0
r_r14: .quad 0
r_r15: .quad 0
	.org 0x400
path:
	.org 0x600
sym:
	.org 0x700
arg:
	.org 0x1000
xstate:
`

// trampolineCode is trampolineSource assembled: its .text up to blockOff.
var trampolineCode = []byte{
	0xff, 0x15, 0x2a, 0x03, 0x00, 0x00, 0x48, 0x89, 0x05, 0x0b, 0x03, 0x00, 0x00, 0x8b, 0x08, 0x48,
	0x89, 0x0d, 0x0a, 0x03, 0x00, 0x00, 0x48, 0x8b, 0x05, 0x0b, 0x03, 0x00, 0x00, 0x48, 0x85, 0xc0,
	0x75, 0x2c, 0x48, 0x8d, 0x3d, 0xd7, 0x03, 0x00, 0x00, 0xbe, 0x02, 0x00, 0x00, 0x00, 0xff, 0x15,
	0x04, 0x03, 0x00, 0x00, 0x48, 0x85, 0xc0, 0x74, 0x32, 0x48, 0x89, 0xc7, 0x48, 0x8d, 0x35, 0xbd,
	0x05, 0x00, 0x00, 0xff, 0x15, 0xf7, 0x02, 0x00, 0x00, 0x48, 0x85, 0xc0, 0x74, 0x1d, 0x48, 0x8d,
	0x3d, 0xab, 0x06, 0x00, 0x00, 0xff, 0xd0, 0x48, 0x89, 0x05, 0xb2, 0x02, 0x00, 0x00, 0x48, 0xc7,
	0x05, 0x9f, 0x02, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0xeb, 0x18, 0xff, 0x15, 0xd7, 0x02, 0x00,
	0x00, 0x48, 0x89, 0x05, 0x98, 0x02, 0x00, 0x00, 0x48, 0xc7, 0x05, 0x85, 0x02, 0x00, 0x00, 0x01,
	0x00, 0x00, 0x00, 0x48, 0x8b, 0x05, 0x8e, 0x02, 0x00, 0x00, 0x48, 0x8b, 0x0d, 0x8f, 0x02, 0x00,
	0x00, 0x89, 0x08, 0x31, 0xc9, 0x0f, 0x01, 0xd0, 0x25, 0xff, 0xff, 0xf9, 0xff, 0x0f, 0xae, 0x2d,
	0x5c, 0x0f, 0x00, 0x00, 0x48, 0xc7, 0x05, 0x51, 0x02, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xff,
	0x35, 0x9b, 0x02, 0x00, 0x00, 0x9d, 0x48, 0x8b, 0x05, 0xab, 0x02, 0x00, 0x00, 0x48, 0x8b, 0x1d,
	0xac, 0x02, 0x00, 0x00, 0x48, 0x8b, 0x0d, 0xad, 0x02, 0x00, 0x00, 0x48, 0x8b, 0x15, 0xae, 0x02,
	0x00, 0x00, 0x48, 0x8b, 0x35, 0xaf, 0x02, 0x00, 0x00, 0x48, 0x8b, 0x3d, 0xb0, 0x02, 0x00, 0x00,
	0x48, 0x8b, 0x2d, 0xb1, 0x02, 0x00, 0x00, 0x4c, 0x8b, 0x05, 0xb2, 0x02, 0x00, 0x00, 0x4c, 0x8b,
	0x0d, 0xb3, 0x02, 0x00, 0x00, 0x4c, 0x8b, 0x15, 0xb4, 0x02, 0x00, 0x00, 0x4c, 0x8b, 0x1d, 0xb5,
	0x02, 0x00, 0x00, 0x4c, 0x8b, 0x25, 0xb6, 0x02, 0x00, 0x00, 0x4c, 0x8b, 0x2d, 0xb7, 0x02, 0x00,
	0x00, 0x4c, 0x8b, 0x35, 0xb8, 0x02, 0x00, 0x00, 0x4c, 0x8b, 0x3d, 0xb9, 0x02, 0x00, 0x00, 0x48,
	0x8b, 0x25, 0x3a, 0x02, 0x00, 0x00, 0xff, 0x25, 0x2c, 0x02, 0x00, 0x00,
}

// Spec says what an injected thread calls: Entry, or the function Symbol
// of the object Path loaded with dlopen (RTLD_NOW), with a pointer to a
// copy of Arg in the page. The argument area starts with the page's
// address and length (ArgHeader bytes, filled by Inject), so that the
// callee can unmap the page once no thread runs in it any more; Arg
// follows.
type Spec struct {
	Path, Symbol string
	Entry        uint64
	Arg          []byte
}

// ArgHeader is the part of the argument area Inject fills.
const ArgHeader = 16

// Injection is a call made by a thread of the target that runs on its own:
// the thread is no longer stopped or traced, and record polls the page.
type Injection struct {
	pid  int
	page uint64
	mem  *os.File
	// Tries is how many stops it took to find a safe point.
	Tries int
}

// Inject stops a thread of the target at a safe point (see Stop), makes
// it issue mmap for a page (syscall, from t.gap), writes the trampoline there and lets the
// thread go into it: the thread calls what s says and returns to where it
// was on its own. The caller follows the call with Wait and the argument
// area with ReadArg and WriteArg. The OS thread that calls Inject makes
// its ptrace requests (runtime.LockOSThread around it).
func (t *Target) Inject(s Spec) (*Injection, error) {
	if len(s.Path) >= symOff-pathOff || len(s.Symbol) >= argOff-symOff || ArgHeader+len(s.Arg) > ArgSize {
		return nil, errors.New("injection: path, symbol or argument too long")
	}
	st, err := t.Stop()
	if err != nil {
		return nil, err
	}
	th := st.th
	size := uint64(xstateOff + (len(th.xsave)+pageSize-1)&^(pageSize-1))
	const protRWX, mapPrivateAnon = 7, 0x22
	page, err := th.syscall(t.gap, unix.SYS_MMAP, 0, size, protRWX, mapPrivateAnon, ^uint64(0), 0)
	if err != nil {
		st.Release()
		return nil, err
	}
	// From here the thread is stopped at the system call's exit: let go,
	// it runs on through gapCode's restore, as it was.
	switch {
	case int64(page) < 0 && int64(page) > -4096:
		err = refused("its mmap of a page for the injected code failed (%v): memory both writable and executable denied?", unix.Errno(-int64(page)))
	case page == 0:
		err = refused("its mmap of a page for the injected code failed")
	default:
		err = th.write(page, t.pageImage(th, page, size, s))
	}
	if err == nil {
		r := th.regs
		r.Rip = page
		r.Rsp = (r.Rsp - 128) &^ 15
		r.Orig_rax = ^uint64(0)
		r.Eflags &^= 0x400
		err = unix.PtraceSetRegs(th.tid, &r)
	}
	// Detached, the thread runs the trampoline (or the restore); its
	// memory stays open for Wait.
	mem := th.mem
	th.mem = nil
	th.detach()
	if err != nil {
		mem.Close()
		return nil, err
	}
	return &Injection{pid: t.pid, page: page, mem: mem, Tries: st.Tries}, nil
}

// pageImage is what the page holds when the thread enters it: the
// trampoline, the addresses it calls, the registers to put back (those
// of a system call the stop broke off set to issue it again), the path,
// the symbol, the argument and the extended state.
func (t *Target) pageImage(th *thread, page, size uint64, s Spec) []byte {
	img := make([]byte, xstateOff+len(th.xsave))
	copy(img, trampolineCode)
	r := th.regs
	rip, rax := resumePoint(&r)
	w := [nWords]uint64{
		wEntry: s.Entry, wErrnoFn: t.errnoAt, wDlopen: t.dlopen, wDlsym: t.dlsym, wDlerror: t.dlerror,
		wFlags: r.Eflags, wRip: rip, wRsp: r.Rsp, wRax: rax, wRbx: r.Rbx, wRcx: r.Rcx, wRdx: r.Rdx,
		wRsi: r.Rsi, wRdi: r.Rdi, wRbp: r.Rbp, wR8: r.R8, wR9: r.R9, wR10: r.R10, wR11: r.R11,
		wR12: r.R12, wR13: r.R13, wR14: r.R14, wR15: r.R15,
	}
	for i, v := range w {
		binary.NativeEndian.PutUint64(img[blockOff+8*i:], v)
	}
	copy(img[pathOff:], s.Path)
	copy(img[symOff:], s.Symbol)
	binary.NativeEndian.PutUint64(img[argOff:], page)
	binary.NativeEndian.PutUint64(img[argOff+8:], size)
	copy(img[argOff+ArgHeader:], s.Arg)
	x := img[xstateOff:]
	copy(x, th.xsave)
	// The XSAVE header past XSTATE_BV must be zero for xrstor (the
	// standard form: XCOMP_BV 0).
	if len(x) >= 576 {
		clear(x[520:576])
	}
	return img
}

// ArgAt is the address of the argument area in the target.
func (in *Injection) ArgAt() uint64 { return in.page + argOff }

// ReadArg reads the argument area from off (past ArgHeader) into b.
func (in *Injection) ReadArg(off int, b []byte) error {
	_, err := in.mem.ReadAt(b, int64(in.page+argOff+ArgHeader+uint64(off)))
	return err
}

// WriteArg writes b into the argument area at off (past ArgHeader).
func (in *Injection) WriteArg(off int, b []byte) error {
	_, err := in.mem.WriteAt(b, int64(in.page+argOff+ArgHeader+uint64(off)))
	return err
}

// pollEvery is how often a running injection is looked at.
const pollEvery = 200 * time.Microsecond

// Done reports whether the injected call has ended (the thread is leaving
// or has left the page) and, if so, what the entry returned, or the
// loader's message when it could not load the object or find the symbol.
func (in *Injection) Done() (done bool, ret uint64, err error) {
	var b [3 * 8]byte
	if _, err := in.mem.ReadAt(b[:], int64(in.page+blockOff)); err != nil {
		return false, 0, err
	}
	w := func(i int) uint64 { return binary.NativeEndian.Uint64(b[8*i:]) }
	if w(wDone) == 0 {
		return false, 0, nil
	}
	if w(wStatus) == statusFailed {
		msg := "dlopen failed"
		if w(wResult) != 0 {
			msg = readString(in.mem, w(wResult))
		}
		return true, 0, &LoadError{Msg: msg}
	}
	return true, w(wResult), nil
}

// LoadError is the loader's refusal of the object or symbol (dlerror).
type LoadError struct{ Msg string }

func (e *LoadError) Error() string { return e.Msg }

// Wait waits until the injected call has ended or until cond, given the
// argument area past ArgHeader, holds (cond nil: the end only); it
// reports whether the call ended. The process exiting is errGone.
func (in *Injection) Wait(timeout time.Duration, cond func(arg []byte) bool) (ended bool, err error) {
	deadline := time.Now().Add(timeout)
	arg := make([]byte, ArgSize-ArgHeader)
	for {
		var b [8]byte
		if _, err := in.mem.ReadAt(b[:], int64(in.page+blockOff+8*wDone)); err != nil {
			return false, gone(in.pid, err)
		}
		if binary.NativeEndian.Uint64(b[:]) != 0 {
			return true, nil
		}
		if cond != nil {
			if err := in.ReadArg(0, arg); err != nil {
				return false, gone(in.pid, err)
			}
			if cond(arg) {
				return false, nil
			}
		}
		if time.Now().After(deadline) {
			return false, errTimeout
		}
		time.Sleep(pollEvery)
	}
}

// gone turns a failed read of an exited process into errGone.
func gone(pid int, err error) error {
	if unix.Kill(pid, 0) == unix.ESRCH {
		return errGone
	}
	return err
}

// Close lets go of the target's memory; the page stays for the callee to
// unmap.
func (in *Injection) Close() { in.mem.Close() }
