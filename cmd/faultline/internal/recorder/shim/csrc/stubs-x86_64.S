/*
 * stubs-x86_64.S — the shim's x86-64 assembly: the interposed entry
 * points' stubs and the launcher's entry. Another architecture is
 * another such file (and its struct saved in shim.h).
 */

/*
 * Entry stubs: save the callee-saved registers (what DWARF unwinding of
 * the callers needs) below the return address and pass their address as
 * the argument after the function's own (reg). 72 bytes (STUB_FRAME in
 * shim.h) keep the stack 16-byte aligned at the call.
 */
.macro STUB name, impl, reg
	.globl \name
	.type \name, @function
\name:
	.cfi_startproc
	subq $72, %rsp
	.cfi_adjust_cfa_offset 72
	movq %rbx, 0(%rsp)
	movq %rbp, 8(%rsp)
	movq %r12, 16(%rsp)
	movq %r13, 24(%rsp)
	movq %r14, 32(%rsp)
	movq %r15, 40(%rsp)
	movq %rsp, \reg
	call \impl
	addq $72, %rsp
	.cfi_adjust_cfa_offset -72
	ret
	.cfi_endproc
	.size \name, .-\name
.endm

/*
 * STUB6 is STUB for a function of six integer arguments (all the
 * argument registers): the registers' address goes on the stack as the
 * seventh. 88 bytes keep the stack aligned; the registers are saved where
 * STUB saves them relative to the entry stack pointer (72 bytes below
 * it), so struct saved and entry_sp serve both.
 */
.macro STUB6 name, impl
	.globl \name
	.type \name, @function
\name:
	.cfi_startproc
	subq $88, %rsp
	.cfi_adjust_cfa_offset 88
	movq %rbx, 16(%rsp)
	movq %rbp, 24(%rsp)
	movq %r12, 32(%rsp)
	movq %r13, 40(%rsp)
	movq %r14, 48(%rsp)
	movq %r15, 56(%rsp)
	leaq 16(%rsp), %rax
	movq %rax, 0(%rsp)
	call \impl
	addq $88, %rsp
	.cfi_adjust_cfa_offset -88
	ret
	.cfi_endproc
	.size \name, .-\name
.endm

	.text
	STUB malloc, fl_malloc, %rsi
	STUB calloc, fl_calloc, %rdx
	STUB realloc, fl_realloc, %rdx
	STUB reallocarray, fl_reallocarray, %rcx
	STUB memalign, fl_memalign, %rdx
	STUB aligned_alloc, fl_aligned_alloc, %rdx
	STUB posix_memalign, fl_posix_memalign, %rcx
	STUB valloc, fl_valloc, %rsi
	STUB pvalloc, fl_pvalloc, %rsi
#ifdef FL_FAMILY
/*
 * A family's own entry points (family.c): at most four arguments, which
 * stay in their registers; the saved registers' address goes in the
 * fifth (r8) and the symbol's line in entrypoints.h in the sixth (r9).
 */
.macro STUBI name, line
	.globl \name
	.type \name, @function
\name:
	.cfi_startproc
	subq $72, %rsp
	.cfi_adjust_cfa_offset 72
	movq %rbx, 0(%rsp)
	movq %rbp, 8(%rsp)
	movq %r12, 16(%rsp)
	movq %r13, 24(%rsp)
	movq %r14, 32(%rsp)
	movq %r15, 40(%rsp)
	movq %rsp, %r8
	movq $\line, %r9
	call fl_ep
	addq $72, %rsp
	.cfi_adjust_cfa_offset -72
	ret
	.cfi_endproc
	.size \name, .-\name
.endm

#include "entrypoints.h"
#define FL_EP(line, sym, fn, fams, isfree, nargs, size_arg, nmemb_arg, whole) \
	.if ((fams) >> FL_FAMILY) & 1 ; STUBI sym, line ; .endif ;
	FL_EPS
#else
	/* libstdc++'s operator new, stood in for (new.c). */
	STUB _Znwm, fl_op_new, %rsi
	STUB _Znam, fl_op_new_array, %rsi
#endif
	STUB6 mmap, fl_mmap
	STUB6 mmap64, fl_mmap

/*
 * The launcher's entry (launch.c): the stack pointer at entry points at
 * argc, then argv and the environment (the x86-64 ABI).
 */
	.globl fl_launch_start
	.hidden fl_launch_start
	.type fl_launch_start, @function
fl_launch_start:
	xorl %ebp, %ebp
	movq %rsp, %rdi
	andq $-16, %rsp
	call fl_launch_main
	hlt
	.size fl_launch_start, .-fl_launch_start

/* The launcher's interpreter (PT_INTERP): the object runs as a program. */
	.section .interp, "a", @progbits
	.string "/lib64/ld-linux-x86-64.so.2"

	.section .note.GNU-stack, "", @progbits
