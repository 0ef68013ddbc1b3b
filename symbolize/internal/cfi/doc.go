// Package cfi reads DWARF call frame information — .eh_frame (indexed by
// .eh_frame_hdr) and .debug_frame — and answers "what are the unwind rules
// at this PC?" without allocating in steady state.
//
// Specs: DWARF 5 §6.4 (https://dwarfstd.org/doc/DWARF5.pdf) for CIE/FDE
// layout and DW_CFA_* instructions, §2.5 for DW_OP_* expressions; the Linux
// Standard Base 5.0 "Exception Frames" chapter
// (https://refspecs.linuxfoundation.org/LSB_5.0.0/LSB-Core-generic/LSB-Core-generic/ehframechpt.html)
// for .eh_frame, its augmentations (z, R, P, L, S) and DW_EH_PE_* pointer
// encodings, and for .eh_frame_hdr.
//
// API:
//
//	func Load(exe, debug *elf.File) (*Table, error)  // debug (separate debug file) may be nil
//	func New(s Sections) (*Table, error)              // raw section bytes (tests, fuzzing)
//	func (t *Table) Find(pc uint64, row *Row) error   // pc: ELF virtual address
//	func (t *Table) Entry() uint64                    // ELF e_entry
//	func (r *Row) Expr(rule Rule) []byte              // bytes of an expression rule
//	func Eval(expr []byte, env Env, push []uint64) (uint64, error)
//
// Find fills a caller-provided Row: the PC range it holds for, the CFA
// rule (RuleRegOffset: Reg+Offset, or RuleValExpression), one Rule per
// DWARF register below NumRegs (unspecified, undefined, same value,
// offset(N), val_offset(N), register, expression, val_expression), the
// return-address column and whether the FDE is a signal frame. Errors:
// ErrNoFDE (no FDE covers pc — fall back to frame pointers), *FormatError
// (malformed CFI, with section and offset), ErrNoCFI from Load.
// Expressions are evaluated by Eval against an Env that supplies registers
// and memory reads that can fail (*ExprError wrapping ErrMemory or
// ErrRegister).
//
// Design: FDEs stay in their section bytes; .eh_frame_hdr's sorted table (or
// a sorted index built by scanning, for .debug_frame and binaries without a
// usable header) is binary searched with sort.Search; the CIE and FDE
// programs are interpreted only for a PC that is asked about, up to that PC,
// and the resulting row is cached for its PC range in a small 2-way
// set-associative cache. Both cache hits and misses allocate nothing. The
// interpreters cap their steps and report malformed input as errors; they
// never panic. A Table is safe for concurrent use (a mutex guards the cache).
//
// Tests compare every row of libc.so.6, python3 and two committed fixtures
// with `readelf --debug-dump=frames-interp`.
package cfi
