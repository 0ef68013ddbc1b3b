/*
 * new.c — operator new and new[]. libstdc++'s (new_op.cc) calls malloc
 * (through the PLT) with the size, 1 for 0, and while malloc fails calls
 * the new-handler, or throws bad_alloc when there is none; new[] calls operator new. The
 * shim stands in for both, doing the same with libstdc++'s own
 * get_new_handler and __throw_bad_alloc, and records each malloc call as
 * libstdc++ would make it — but with the registers and return address at
 * operator new's entry: the call's return address is then the program's
 * call site, which the recorder writes without stack words, and a stack
 * taken here unwinds from malloc straight to that site. bad_alloc unwinds
 * through the shim (its stubs carry CFI, and it holds nothing across the
 * throw). The nothrow forms are libstdc++'s: they call operator new inside
 * a try block, which a C function cannot mimic (they reach the shim's).
 */
#include "writer.h"

static void *op_new(size_t n, const struct saved *s)
{
	for (;;) {
		void *p = fl_malloc(n ? n : 1, s);
		if (likely(p != NULL))
			return p;
		void (*h)(void) = real.get_new_handler();
		if (!h)
			real.throw_bad_alloc();
		h();
	}
}

/* new_ready reports whether the shim stands in for operator new; when it
 * does not, the next operator new (real.op_new, real.op_new_array) runs,
 * or, while no C++ runtime can be found (a call during the shim's own
 * init), the boot arena serves. */
static int new_ready(void)
{
	if (unlikely(__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2))
		init();
	if (unlikely(!__atomic_load_n(&real.op_new, __ATOMIC_ACQUIRE)) && !ts.depth) {
		ts.depth++;
		ts.own++;
		resolve_new();
		ts.own--;
		ts.depth--;
	}
	return __atomic_load_n(&std_new, __ATOMIC_RELAXED);
}

/* no_new serves an operator new call when no loaded object defines one
 * but the shim (a call from the shim's own init, or a runtime that cannot
 * be found): malloc, and abort where operator new would throw. */
static void *no_new(size_t n, const struct saved *s)
{
	if (ts.depth)
		return boot_alloc(n ? n : 1, 16);
	void *p = fl_malloc(n ? n : 1, s);
	if (!p)
		abort();
	return p;
}

HIDDEN void *fl_op_new(size_t n, const struct saved *s)
{
	if (unlikely(!new_ready())) {
		void *(*next)(size_t) = __atomic_load_n(&real.op_new, __ATOMIC_ACQUIRE);
		return next ? next(n) : no_new(n, s);
	}
	return op_new(n, s);
}

HIDDEN void *fl_op_new_array(size_t n, const struct saved *s)
{
	if (unlikely(!new_ready())) {
		void *(*next)(size_t) = __atomic_load_n(&real.op_new, __ATOMIC_ACQUIRE) ? real.op_new_array : NULL;
		return next ? next(n) : no_new(n, s);
	}
	return op_new(n, s);
}
