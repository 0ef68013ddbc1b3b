// Package symbolize turns a recording's samples into named stacks.
//
// A Session is three parts. Its Procs follows every process of a
// recording over its time-ordered records (Observe: MMAP/MMAP2, COMM with
// exec, FORK, EXIT). The Session itself, the unwinding front end, unwinds
// each sample's user stack from its registers and stack copy (Unwind, using
// package unwind over the binaries' CFI, and a uprobe return trampoline's
// real return address); a Pipeline (NewPipeline) does the same on other
// goroutines. Its Table interns the stacks and names each
// unique location once (Lines, package binfile: ELF symbols and DWARF with
// inline chains, debug files found the way perf finds them).
// ScriptWriter prints samples in perf script's layout.
//
// Return addresses are named by their call instruction (PC-1), as perf's
// libdw unwinder and addr2line do.
package symbolize
