// Package unwind walks user stacks recorded by `perf record --call-graph
// dwarf` using the binaries' DWARF CFI (symbolize/internal/cfi), falling
// back to frame pointers where there is no CFI and to the kernel's
// callchain where the stack copy ends.
//
// Inputs per sample (perf's PERF_SAMPLE_REGS_USER and PERF_SAMPLE_STACK_USER,
// see tools/perf/Documentation/perf.data-file-format.txt and
// include/uapi/linux/perf_event.h):
//
//	regs := unwind.RegsFromPerf(unwind.ArchX86_64, s.RegsMask, s.Regs) // perf order -> DWARF numbering
//	sp, _ := regs.SP(unwind.ArchX86_64)                                 // the stack copy starts at SP
//	frames, stop = u.Unwind(regs, sp, s.Stack, resolver, nil, frames[:0])
//
// u is an *Unwinder from New(ArchX86_64), one per goroutine (it holds
// scratch state). frames is reused across calls: in steady state Unwind
// allocates nothing. frames[0] is the sample IP; every later frame is a
// return address (Frame.Return), so symbolize PC−1 (its call instruction),
// except frames interrupted by a signal, whose PC is exact. Frame.Kind says
// whether CFI, frame pointers or the kernel callchain produced the frame.
// stop says why the walk ended; stop.Complete() is true when it reached the
// outermost frame (the CFI's undefined return address in _start, clone3 or
// start_thread; ld.so's entry code; or a zero return address).
//
// The Resolver maps runtime PCs to CFI: the process-state code implements
// it from MMAP2 records —
//
//	Lookup(pc) (table *cfi.Table, bias uint64, ok bool)
//
// returning the cfi.Table of the ELF file mapped at pc (cfi.Load, once per
// file / build ID; a nil table with ok=true means "mapped but without
// CFI") and bias = runtime address − ELF virtual address, which LoadBias
// computes from the file's program headers and the MMAP2 record's address
// and page offset.
// A PC in no known mapping — JIT code, or the `[uprobes]` return
// trampoline that a uretprobe leaves on the stack in place of the
// probed function's return address — ends the
// walk with StopUnknownMapping unless the frame-pointer chain leads back
// into known code; the trampoline frame itself is still reported. A
// Resolver that also implements TrampolineResolver can hand back the real
// return address (e.g. remembered from the malloc entry probe's sample:
// key (tid, entry SP + 8) → the word at entry SP) and the walk continues
// through it: on the shared fixtures this completes every page fault taken
// inside a uretprobed malloc (FrameTrampoline marks the repaired frame).
//
// Registers: x86-64 is implemented and tested; the AArch64 perf→DWARF
// mapping is in place but untested, and return-address signing
// (RA_SIGN_STATE) is not stripped yet.
package unwind
