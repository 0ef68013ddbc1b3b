/*
 * stack.h — the user stack a sampled call carries (stack.c): from the
 * stack pointer at the function's entry up to the top of its thread's
 * stack, which is as far as unwinding reads, and at most the cap
 * (fl_ctrl.stack_size).
 */
#ifndef FAULTLINE_STACK_H
#define FAULTLINE_STACK_H

#include "shim.h"

/* stack_bounds finds this thread's stack (ts.stack_lo, stack_hi,
 * copy_hi); ring_claim calls it at the thread's first recorded call. */
void stack_bounds(void);

/* stack_room returns how many stack bytes to make room for at a sampled
 * call whose entry stack pointer is sp: up to the top of the thread's
 * stack when sp lies in it, else (a signal handler's alternate stack, a
 * coroutine's, a thread whose stack was not found) the cap. */
static inline uint32_t stack_room(uint64_t sp)
{
	uint64_t n = ctrl->stack_size;
	if (sp >= ts.stack_lo && sp < ts.copy_hi && ts.copy_hi - sp < n)
		n = ts.copy_hi - sp;
	return (uint32_t)n;
}

/* stack_bytes is what the stack part of a record takes for n stack
 * bytes: the registers, the byte count, the bytes padded to 8. */
static inline uint32_t stack_bytes(uint64_t n)
{
	return (uint32_t)(sizeof(struct fl_regs) + 8 + ((n + 7) & ~7ull));
}

/* put_stack writes the stack part of a record at g: the registers s saved
 * at the entry of the function at ip, whose entry stack pointer is sp, the
 * byte count, and at most room bytes of stack from sp (stack_room). It
 * returns the bytes copied: fewer than room where sp lies outside the
 * thread's known stack and the memory above it ends sooner. */
uint64_t put_stack(struct fl_regs *g, const struct saved *s, uint64_t sp,
		   void *ip, uint32_t room);

#endif
