/*
 * alloc.c — the C allocator's entry points: each records the call and
 * calls the allocator the program would have called. The entry stubs
 * (stubs-x86_64.S) call these with the registers they saved.
 */
#include "writer.h"

HIDDEN void *fl_malloc(size_t n, const struct saved *s)
{
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!real.malloc))
			return boot_alloc(n, 16);
		return real.malloc(n);
	}
	struct call c;
	entry(r, FL_FN_MALLOC, real.malloc, n, 0, 0, n, s, &c);
	done();
	void *p = real.malloc(n);
	returned(r, FL_FN_MALLOC, real.malloc, p, 0, s, &c);
	return p;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	uint64_t p;
	return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

HIDDEN void *fl_calloc(size_t m, size_t n, const struct saved *s)
{
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!real.calloc)) {
			uint64_t b = mul_sat(m, n);
			/* The arena is zeroed static memory never reused. */
			return b == UINT64_MAX ? NULL : boot_alloc(b, 16);
		}
		return real.calloc(m, n);
	}
	struct call c;
	entry(r, FL_FN_CALLOC, real.calloc, m, n, 0, mul_sat(m, n), s, &c);
	done();
	void *p = real.calloc(m, n);
	returned(r, FL_FN_CALLOC, real.calloc, p, 0, s, &c);
	return p;
}

static void *boot_realloc(void *old, size_t n)
{
	void *p = real.malloc ? real.malloc(n) : boot_alloc(n, 16);
	if (p && old) {
		size_t have = (size_t)(boot + sizeof boot - (char *)old);
		memcpy(p, old, have < n ? have : n);
	}
	return p;
}

HIDDEN void *fl_realloc(void *old, size_t n, const struct saved *s)
{
	if (unlikely(is_boot(old)))
		return boot_realloc(old, n);
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!real.realloc))
			return boot_realloc(old, n);
		return real.realloc(old, n);
	}
	struct call c;
	entry(r, FL_FN_REALLOC, real.realloc, (uint64_t)old, n, 0, n, s, &c);
	done();
	void *p = real.realloc(old, n);
	returned(r, FL_FN_REALLOC, real.realloc, p, 0, s, &c);
	return p;
}

HIDDEN void *fl_reallocarray(void *old, size_t m, size_t n, const struct saved *s)
{
	if (unlikely(is_boot(old) || !real.reallocarray)) {
		uint64_t b = mul_sat(m, n);
		if (b == UINT64_MAX) {
			errno = ENOMEM;
			return NULL;
		}
		return fl_realloc(old, b, s);
	}
	struct fl_ring *r = ring();
	if (!r)
		return real.reallocarray(old, m, n);
	struct call c;
	entry(r, FL_FN_REALLOCARRAY, real.reallocarray, (uint64_t)old, m, n,
	      mul_sat(m, n), s, &c);
	done();
	void *p = real.reallocarray(old, m, n);
	returned(r, FL_FN_REALLOCARRAY, real.reallocarray, p, 0, s, &c);
	return p;
}

/* The aligned family: fn says which entry point, all call one shape. */
static void *aligned(int fn, void *(*f)(size_t, size_t), size_t al, size_t n,
		     const struct saved *s)
{
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!f))
			return boot_alloc(n, al);
		return f(al, n);
	}
	struct call c;
	entry(r, fn, f, al, n, 0, n, s, &c);
	done();
	void *p = f(al, n);
	returned(r, fn, f, p, 0, s, &c);
	return p;
}

HIDDEN void *fl_memalign(size_t al, size_t n, const struct saved *s)
{
	return aligned(FL_FN_MEMALIGN, real.memalign, al, n, s);
}

HIDDEN void *fl_aligned_alloc(size_t al, size_t n, const struct saved *s)
{
	return aligned(FL_FN_ALIGNED_ALLOC, real.aligned_alloc, al, n, s);
}

HIDDEN int fl_posix_memalign(void **out, size_t al, size_t n, const struct saved *s)
{
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!real.posix_memalign)) {
			*out = boot_alloc(n, al);
			return *out ? 0 : ENOMEM;
		}
		return real.posix_memalign(out, al, n);
	}
	struct call c;
	entry(r, FL_FN_POSIX_MEMALIGN, real.posix_memalign, (uint64_t)out, al, n, n, s, &c);
	done();
	int st = real.posix_memalign(out, al, n);
	returned(r, FL_FN_POSIX_MEMALIGN, real.posix_memalign,
		 st == 0 ? *out : NULL, (uint64_t)(unsigned)st, s, &c);
	return st;
}

static void *paged(int fn, void *(*f)(size_t), size_t n, const struct saved *s)
{
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!f))
			return boot_alloc(n, 4096);
		return f(n);
	}
	struct call c;
	entry(r, fn, f, n, 0, 0, n, s, &c);
	done();
	void *p = f(n);
	returned(r, fn, f, p, 0, s, &c);
	return p;
}

HIDDEN void *fl_valloc(size_t n, const struct saved *s)
{
	return paged(FL_FN_VALLOC, real.valloc, n, s);
}

HIDDEN void *fl_pvalloc(size_t n, const struct saved *s)
{
	return paged(FL_FN_PVALLOC, real.pvalloc, n, s);
}

/* free needs no registers: frees never get stacks. */
EXPORT void free(void *p)
{
	if (unlikely(is_boot(p)))
		return;
	struct fl_ring *r = ring();
	if (!r) {
		if (likely(real.free != NULL))
			real.free(p);
		return;
	}
	write_free(r, (void *)real.free, p);
	done();
	real.free(p);
}

