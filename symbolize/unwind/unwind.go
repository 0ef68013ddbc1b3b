package unwind

import (
	"errors"
	"fmt"

	"github.com/faultline/faultline/symbolize/internal/cfi"
)

// DefaultMaxDepth is the frame cap of an Unwinder whose MaxDepth is zero.
const DefaultMaxDepth = 256

// Resolver maps a runtime PC to the CFI of the binary mapped there.
type Resolver interface {
	// Lookup returns the table of the binary mapped at pc and its load
	// bias (runtime address − ELF virtual address). ok is false when no
	// file-backed mapping covers pc (JIT code, the [uprobes] trampoline,
	// an unknown [vdso]). ok with a nil table means "mapped, but no CFI":
	// the unwinder then tries frame pointers.
	Lookup(pc uint64) (table *cfi.Table, bias uint64, ok bool)
}

// TrampolineResolver may be implemented by a Resolver to undo the return
// address a uretprobe swapped for the kernel's `[uprobes]` trampoline: while
// the probed function runs, the return-address slot holds the trampoline
// and the real return address is known only to the kernel (and to the
// caller, from the probe's entry sample). When a frame's PC is in no known
// mapping, Unwind asks ResolveTrampoline(pc, sp), where sp is that frame's
// stack pointer — the probed function's CFA, i.e. its entry SP + 8 on
// x86-64 — and continues from ret when ok. Frames so fixed have Kind
// FrameTrampoline.
type TrampolineResolver interface {
	ResolveTrampoline(pc, sp uint64) (ret uint64, ok bool)
}

// FrameKind says how a frame's PC was found.
type FrameKind uint8

const (
	// FrameSample is the first frame: the sample's IP register.
	FrameSample FrameKind = iota
	// FrameCFI: recovered with the callee's DWARF CFI.
	FrameCFI
	// FrameFP: recovered by following the frame-pointer chain because the
	// callee had no CFI (or its CFI could not be used).
	FrameFP
	// FrameCallchain: taken from the kernel's callchain after the DWARF
	// walk stopped.
	FrameCallchain
	// FrameTrampoline: the stack held a kernel return trampoline here;
	// the PC is the original return address from TrampolineResolver.
	FrameTrampoline
)

func (k FrameKind) String() string {
	switch k {
	case FrameSample:
		return "sample"
	case FrameCFI:
		return "cfi"
	case FrameFP:
		return "fp"
	case FrameCallchain:
		return "callchain"
	case FrameTrampoline:
		return "trampoline"
	}
	return fmt.Sprintf("FrameKind(%d)", k)
}

// Frame is one entry of an unwound stack, innermost first.
type Frame struct {
	// PC is a runtime address: the sample IP for the first frame, the
	// return address for callers.
	PC   uint64
	Kind FrameKind
	// Return is set when PC is a return address: the call instruction is
	// before it, so symbolize PC−1. It is clear for the first
	// frame and for a frame interrupted by a signal (unwound through a
	// signal trampoline), whose PC is exact.
	Return bool
}

// LookupPC is the address to symbolize: PC−1 for return addresses.
func (f Frame) lookupPC() uint64 {
	if f.Return {
		return f.PC - 1
	}
	return f.PC
}

// Stop says why a walk ended.
type Stop uint8

const (
	// StopRoot: the CFI marks the return address undefined — the
	// outermost frame (_start, clone3, start_thread) — or the PC is in
	// the entry-point code of a binary without CFI there (ld.so's
	// _start/_dl_start_user). A complete stack.
	StopRoot Stop = iota
	// StopZeroPC: the caller's PC is 0, the other conventional end of a
	// stack. Complete.
	StopZeroPC
	// StopStackEnd: a read fell outside the copied user stack (perf copies
	// 8 KiB by default).
	StopStackEnd
	// StopNoCFI: no CFI for the PC and the frame-pointer chain did not
	// lead anywhere plausible.
	StopNoCFI
	// StopUnknownMapping: the PC is in no known mapping (JIT code, the
	// [uprobes] return trampoline) and frame pointers did not help.
	StopUnknownMapping
	// StopBadCFA: the CFA did not move up the stack (outside signal
	// frames): the walk would loop.
	StopBadCFA
	// StopBadCFI: malformed CFI or a failed DWARF expression.
	StopBadCFI
	// StopNoRegs: a register the CFI needs was not sampled or not
	// recovered.
	StopNoRegs
	// StopDepth: MaxDepth frames.
	StopDepth
)

var stopNames = [...]string{"root", "zero-pc", "stack-end", "no-cfi", "unknown-mapping", "bad-cfa", "bad-cfi", "no-regs", "depth"}

func (s Stop) String() string {
	if int(s) < len(stopNames) {
		return stopNames[s]
	}
	return fmt.Sprintf("Stop(%d)", s)
}

// Complete reports whether the walk reached the outermost frame.
func (s Stop) Complete() bool { return s == StopRoot || s == StopZeroPC }

// Unwinder walks user stacks. It holds scratch state, so use one Unwinder
// per goroutine; Unwind allocates nothing once out has enough capacity.
type Unwinder struct {
	// MaxDepth caps the number of frames (DefaultMaxDepth when 0).
	MaxDepth int
	// Rows, when set, caches CFI rows for this Unwinder alone instead of
	// in each Table (whose cache takes a lock): one per parallel walker.
	Rows *cfi.RowCache

	arch Arch
	a    *archInfo
	row  cfi.Row
	rowp *cfi.Row // the row in force: &row, or the RowCache's
	cur  Regs
	next Regs
	// The stack copy: stack[0] is at address base.
	base     uint64
	stack    []byte
	memFault bool
	// curSignal: the frame being unwound is a signal trampoline.
	curSignal bool
	// evals counts the DWARF expressions evaluated by this Unwind.
	evals int
}

// maxExprEvals bounds the DWARF expressions one Unwind evaluates. Each is
// capped by cfi's step limit, but hostile CFI can attach a looping
// expression to every register of every frame (17 × 256 × 10000 steps per
// sample); real stacks evaluate a few (PLT entries, signal frames). Past
// the budget the walk stops as bad-cfi.
const maxExprEvals = 64

var errExprBudget = errors.New("unwind: DWARF expression budget of one unwind exhausted")

func (u *Unwinder) eval(expr []byte, push []uint64) (uint64, error) {
	u.evals++
	if u.evals > maxExprEvals {
		return 0, errExprBudget
	}
	return cfi.Eval(expr, u, push)
}

// New returns an Unwinder for arch.
func New(arch Arch) *Unwinder {
	return &Unwinder{arch: arch, a: arch.info()}
}

// Reg implements cfi.Env over the frame being unwound.
func (u *Unwinder) Reg(reg uint16) (uint64, bool) { return u.cur.get(int(reg)) }

// ReadMem implements cfi.Env over the stack copy; a read outside it fails
// (and ends the walk with StopStackEnd).
func (u *Unwinder) ReadMem(addr uint64, size int) (uint64, bool) {
	off := addr - u.base
	if addr < u.base || off > uint64(len(u.stack)) || uint64(len(u.stack))-off < uint64(size) {
		u.memFault = true
		return 0, false
	}
	b := u.stack[off:]
	switch size {
	case 1:
		return uint64(b[0]), true
	case 2:
		return uint64(b[0]) | uint64(b[1])<<8, true
	case 4:
		return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24, true
	case 8:
		return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56, true
	}
	return 0, false
}

// Unwind walks the user stack of one sample.
//
// regs are the sample's user registers (RegsFromPerf). stack is perf's copy
// of the user stack, which starts at stackBase = the sampled SP. res finds
// the CFI for each PC. kernelCallchain, optional, is the user part of
// PERF_SAMPLE_CALLCHAIN (PERF_CONTEXT_* markers are skipped): when the
// DWARF walk stops early and its last PC appears in it, the entries after
// that PC are appended as FrameCallchain frames. Frames are appended to
// out[:0]; pass the previous result back in to reuse its memory.
func (u *Unwinder) Unwind(regs Regs, stackBase uint64, stack []byte, res Resolver, kernelCallchain []uint64, out []Frame) ([]Frame, Stop) {
	out = out[:0]
	a := u.a
	if a == nil {
		return out, StopNoRegs
	}
	max := u.MaxDepth
	if max <= 0 {
		max = DefaultMaxDepth
	}
	u.base, u.stack = stackBase, stack
	u.cur = regs
	u.evals = 0
	pc, ok := u.cur.get(a.pc)
	if !ok {
		return out, StopNoRegs
	}
	out = append(out, Frame{PC: pc, Kind: FrameSample})
	exact := true
	stop := StopDepth
	tr, _ := res.(TrampolineResolver)
	for len(out) < max {
		if tr != nil {
			if _, _, mapped := res.Lookup(pc); !mapped {
				sp, _ := u.cur.get(a.sp)
				if ret, ok := tr.ResolveTrampoline(pc, sp); ok && ret != 0 {
					pc = ret
					u.cur.set(a.pc, ret)
					out[len(out)-1].PC = ret
					out[len(out)-1].Kind = FrameTrampoline
					// The kernel's ret would have gone to ret: it is a
					// return address, symbolized at ret-1.
					out[len(out)-1].Return = true
					exact = false
				}
			}
		}
		kind, nextExact, st := u.step(res, pc, exact)
		if u.curSignal {
			// This frame is a signal trampoline (__restore_rt): the kernel
			// pushed its address, no call did, so it is symbolized as is.
			out[len(out)-1].Return = false
		}
		if st != stepOK {
			stop = Stop(st)
			break
		}
		pc = u.cur.Val[a.pc]
		if pc == 0 {
			stop = StopZeroPC
			break
		}
		out = append(out, Frame{PC: pc, Kind: kind, Return: !nextExact})
		exact = nextExact
	}
	if !stop.Complete() && len(kernelCallchain) > 0 {
		out = spliceCallchain(out, kernelCallchain, max)
	}
	u.stack = nil
	return out, stop
}

// LastSP is the stack pointer of the last frame the previous Unwind
// reached (false when it was not recovered). For a walk that reached the
// root it tells how high the thread's stack goes: the copy a walk from
// deeper in the same thread needs reaches at least to there.
func (u *Unwinder) LastSP() (uint64, bool) {
	if u.a == nil {
		return 0, false
	}
	return u.cur.get(u.a.sp)
}

// entryWindow is how far past the ELF entry point a PC without CFI still
// counts as the entry code (ld.so's RTLD_START is 0x3d bytes on x86-64).
const entryWindow = 0x80

// stepOK is step's "carry on" result; other values are Stop reasons.
const stepOK = 255

// step unwinds u.cur by one frame in place.
func (u *Unwinder) step(res Resolver, pc uint64, exact bool) (kind FrameKind, nextExact bool, st int) {
	var table *cfi.Table
	var bias uint64
	mapped := false
	if res != nil {
		table, bias, mapped = res.Lookup(pc)
	}
	cfiFailed := false
	u.curSignal = false
	if mapped && table != nil {
		lookup := pc - bias
		if !exact {
			// A return address may be one past the end of a noreturn
			// call's function; the call itself is before it.
			lookup--
		}
		var err error
		if u.Rows != nil {
			u.rowp, err = u.Rows.Lookup(table, lookup)
		} else {
			err = table.Find(lookup, &u.row)
			u.rowp = &u.row
		}
		if err == nil {
			u.curSignal = u.rowp.Signal
			nextExact, st = u.stepCFI()
			if st == stepOK {
				return FrameCFI, nextExact, stepOK
			}
			if st != int(StopBadCFI) && st != int(StopNoRegs) {
				return 0, false, st
			}
			cfiFailed = true
		} else if !errors.Is(err, cfi.ErrNoFDE) {
			cfiFailed = true
		} else if e := table.Entry(); e != 0 && lookup >= e && lookup-e < entryWindow {
			// ld.so's _start / _dl_start_user carry no CFI: a PC just
			// after the ELF entry point is the process's first frame.
			return 0, false, int(StopRoot)
		}
	}
	st = u.stepFP(res)
	if st == stepOK {
		return FrameFP, false, stepOK
	}
	switch {
	case cfiFailed:
		return 0, false, int(StopBadCFI)
	case !mapped && st != int(StopStackEnd):
		return 0, false, int(StopUnknownMapping)
	}
	return 0, false, st
}

// stepCFI applies u.row to u.cur.
func (u *Unwinder) stepCFI() (nextExact bool, st int) {
	a, row := u.a, u.rowp
	u.memFault = false
	var cfa uint64
	switch row.CFA.Kind {
	case cfi.RuleRegOffset:
		v, ok := u.cur.get(int(row.CFA.Reg))
		if !ok {
			return false, int(StopNoRegs)
		}
		cfa = v + uint64(row.CFA.Offset)
	case cfi.RuleValExpression:
		v, err := u.eval(row.Expr(row.CFA), nil)
		if err != nil {
			return false, u.exprStop(err)
		}
		cfa = v
	default:
		return false, int(StopBadCFI)
	}
	if sp, ok := u.cur.get(a.sp); ok && !row.Signal && row.Regs[a.sp].Kind == cfi.RuleUnspecified {
		// Checked before any memory is read, so a looping CFA is
		// reported as such rather than as the end of the stack copy.
		if cfa < sp || cfa == sp && a.strictCFA {
			return false, int(StopBadCFA)
		}
	}
	raRule := row.Regs[row.RA]
	switch {
	case raRule.Kind == cfi.RuleUndefined:
		return false, int(StopRoot)
	case raRule.Kind == cfi.RuleUnspecified && int(row.RA) == a.pc:
		return false, int(StopBadCFI)
	}
	next := &u.next
	next.Valid = 0
	push := [1]uint64{cfa}
	for r := 0; r < a.nregs; r++ {
		rule := row.Regs[r]
		var v uint64
		have := false
		switch rule.Kind {
		case cfi.RuleUnspecified, cfi.RuleSameValue:
			v, have = u.cur.get(r)
		case cfi.RuleOffset:
			v, have = u.ReadMem(cfa+uint64(rule.Offset), 8)
		case cfi.RuleValOffset:
			v, have = cfa+uint64(rule.Offset), true
		case cfi.RuleRegister:
			v, have = u.cur.get(int(rule.Reg))
		case cfi.RuleExpression:
			addr, err := u.eval(row.Expr(rule), push[:])
			if err == nil {
				v, have = u.ReadMem(addr, 8)
			}
		case cfi.RuleValExpression:
			x, err := u.eval(row.Expr(rule), push[:])
			v, have = x, err == nil
		}
		if have {
			next.Val[r] = v
			next.Valid |= 1 << uint(r)
		}
	}
	if u.evals > maxExprEvals {
		return false, int(StopBadCFI)
	}
	ra, ok := next.get(int(row.RA))
	if !ok {
		if u.memFault {
			return false, int(StopStackEnd)
		}
		return false, int(StopNoRegs)
	}
	if row.Regs[a.sp].Kind == cfi.RuleUnspecified {
		// By definition the CFA is the caller's SP (x86-64, AArch64).
		next.set(a.sp, cfa)
	}
	if sp, ok := u.cur.get(a.sp); ok && !row.Signal {
		newSP, _ := next.get(a.sp)
		if newSP < sp || newSP == sp && a.strictCFA {
			return false, int(StopBadCFA)
		}
	}
	next.set(a.pc, ra)
	u.cur = *next
	return row.Signal, stepOK
}

func (u *Unwinder) exprStop(err error) int {
	if errors.Is(err, cfi.ErrMemory) {
		return int(StopStackEnd)
	}
	if errors.Is(err, cfi.ErrRegister) {
		return int(StopNoRegs)
	}
	return int(StopBadCFI)
}

// stepFP follows the frame-pointer chain one step: [fp] is the caller's
// fp, [fp+8] the return address, and the caller's SP is fp+16 (the same
// layout on x86-64 and AArch64). To avoid following a frame pointer that is
// really a general-purpose register (Debian builds with
// -fomit-frame-pointer), fp must point into the stack copy above SP and
// the return address must land in a known mapping.
func (u *Unwinder) stepFP(res Resolver) int {
	a := u.a
	fp, ok := u.cur.get(a.fp)
	sp, spOK := u.cur.get(a.sp)
	if !ok || !spOK || fp < sp || fp&7 != 0 || fp == 0 {
		return int(StopNoCFI)
	}
	u.memFault = false
	savedFP, ok1 := u.ReadMem(fp, 8)
	ra, ok2 := u.ReadMem(fp+8, 8)
	if !ok1 || !ok2 {
		return int(StopStackEnd)
	}
	if ra == 0 {
		return int(StopZeroPC)
	}
	if res == nil {
		return int(StopNoCFI)
	}
	if _, _, mapped := res.Lookup(ra); !mapped {
		return int(StopNoCFI)
	}
	next := &u.next
	next.Valid = 0
	next.set(a.fp, savedFP)
	next.set(a.sp, fp+16)
	next.set(a.pc, ra)
	if a.ra >= 0 {
		next.set(a.ra, ra)
	}
	u.cur = *next
	return stepOK
}

// perfContextMax is PERF_CONTEXT_MAX (-4095): callchain values at or above
// it are context markers (PERF_CONTEXT_USER = -512, ...).
const perfContextMax = ^uint64(4095 - 1)

func spliceCallchain(out []Frame, cc []uint64, max int) []Frame {
	last := out[len(out)-1].PC
	for i, ip := range cc {
		if ip >= perfContextMax || ip != last {
			continue
		}
		for _, ip := range cc[i+1:] {
			if ip >= perfContextMax || ip == 0 || len(out) >= max {
				break
			}
			out = append(out, Frame{PC: ip, Kind: FrameCallchain, Return: true})
		}
		break
	}
	return out
}
