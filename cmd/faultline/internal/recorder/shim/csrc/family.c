/*
 * family.c — an allocator family's own entry points (jemalloc's mallocx
 * and sdallocx, tcmalloc's tc_new, mimalloc's mi_zalloc, and the
 * family's operator new and delete), in the shim object built for that
 * family (build.sh: FL_FAMILY). entrypoints.h lists them, generated from
 * the table record's uprobes and analyze read; the entry stubs
 * (stubs-x86_64.S) call fl_ep with the arguments, the saved registers and
 * the symbol's line in that list. Each call goes to the next definition
 * of the same name and is recorded as that entry point (fl_rec.fn: its
 * place in the table), with its arguments; a free is recorded as free.
 *
 * The next definitions are called through one type: every argument of
 * these functions is an integer or a pointer (align_val_t is a size_t,
 * nothrow_t is passed by reference), so on x86-64 they are the first four
 * argument registers whatever the prototype, and the result is in rax.
 */
#include "writer.h"
#include "entrypoints.h"

#ifndef FL_FAMILY
#error "family.c is built for one allocator family (-DFL_FAMILY=FL_FAM_...)"
#endif

struct ep {
	const char *sym;
	uint8_t fn, isfree, nargs, whole;
	int8_t size_arg, nmemb_arg;
	uint32_t families;
};

static const struct ep eps[FL_NEP] = {
#define FL_EP(line, sym, fn, fams, isfree, nargs, size_arg, nmemb_arg, whole) \
	[line] = {#sym, fn, isfree, nargs, whole, size_arg, nmemb_arg, fams},
	FL_EPS
#undef FL_EP
};

typedef uint64_t (*next_fn)(uint64_t, uint64_t, uint64_t, uint64_t);
static next_fn next[FL_NEP];

/* recorded[i]: the next definition of line i is the allocator's own (in
 * the object that defines the next malloc). Where the allocator lacks one
 * (mimalloc has no nothrow operator delete) the next is libstdc++'s, which
 * calls another entry point the shim records: it is called unrecorded, so
 * a call is recorded once. */
static uint8_t recorded[FL_NEP];

/* fl_fn_whole says, for each entry point of the table, whether a call
 * may be written whole (writer.c, whole()). */
const uint8_t fl_fn_whole[FL_NFN_ALL] = FL_FN_WHOLE;

/* resolve_family finds the next definition of each of this family's
 * entry points (resolve(), at init). */
void resolve_family(void)
{
	Dl_info alloc, at;
	int known = real.malloc && dladdr((void *)real.malloc, &alloc);
	for (int i = 0; i < FL_NEP; i++) {
		if (!(eps[i].families & (1u << FL_FAMILY)))
			continue;
		next[i] = (next_fn)dlsym(next_scope, eps[i].sym);
		recorded[i] = next[i] && (!known || (dladdr((void *)next[i], &at) &&
						    at.dli_fbase == alloc.dli_fbase));
	}
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	uint64_t p;
	return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

/* unresolved serves a call before the next definitions are known (a call
 * made while the shim initializes) or when there is none: an allocation
 * from the boot arena, a free of nothing. */
static uint64_t unresolved(const struct ep *e, uint64_t a[4])
{
	if (e->isfree)
		return 0;
	uint64_t n = a[e->size_arg];
	if (e->nmemb_arg >= 0)
		n = mul_sat(a[e->nmemb_arg], n);
	return (uint64_t)boot_alloc(n ? n : 1, 16);
}

HIDDEN uint64_t fl_ep(uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
		      const struct saved *s, uint64_t line)
{
	const struct ep *e = &eps[line];
	uint64_t a[4] = {a0, a1, a2, a3};
	if (unlikely(__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2))
		init();
	next_fn f = next[line];
	if (f && !recorded[line])
		return f(a0, a1, a2, a3);
	if (e->isfree) {
		if (unlikely(is_boot((void *)a0)))
			return 0;
		if (unlikely(!f))
			return 0;
		/* An allocator's free entry points may call one another
		 * through its PLT (mimalloc's operator delete calls mi_free):
		 * the free of the pointer being passed on is recorded once. */
		if (unlikely(a0 == ts.freeing))
			return f(a0, a1, a2, a3);
		struct fl_ring *r = ring();
		if (r) {
			write_free(r, (void *)f, (void *)a0);
			done();
		}
		uint64_t outer = ts.freeing;
		ts.freeing = a0;
		uint64_t ret = f(a0, a1, a2, a3);
		ts.freeing = outer;
		return ret;
	}
	if (unlikely(!f))
		return unresolved(e, a);
	struct fl_ring *r = ring();
	if (!r)
		return f(a0, a1, a2, a3);
	uint64_t size = a[e->size_arg];
	if (e->nmemb_arg >= 0)
		size = mul_sat(a[e->nmemb_arg], size);
	struct call c;
	entry(r, e->fn, (void *)f, a0, e->nargs > 1 ? a1 : 0,
	      e->nargs > 2 ? a2 : 0, size, s, &c);
	done();
	uint64_t p = f(a0, a1, a2, a3);
	returned(r, e->fn, (void *)f, (void *)p, 0, s, &c);
	return p;
}
