/*
 * writer.c — the records an allocator call is written as: its entry (with
 * the top of the stack, and a copy of the stack when sampled), its
 * return, or the whole call at its return (abi.h).
 */
#include "writer.h"
#include "stack.h"
#ifdef FL_FAMILY
#include "entrypoints.h"

extern const uint8_t fl_fn_whole[FL_NFN_ALL]; /* family.c */
#endif

/* whole reports whether a call to fn can be an FL_CALL record: at most
 * two arguments and no status. */
static inline int whole(int fn)
{
#ifdef FL_FAMILY
	if (fn >= FL_NFN) /* a family's own (family.c) */
		return fl_fn_whole[fn];
#endif
	return fn != FL_FN_FREE && fn != FL_FN_REALLOCARRAY &&
	       fn != FL_FN_POSIX_MEMALIGN;
}

/* entry records a call's entry: size is what decides whether it gets a
 * stack (the bytes it asks for). A call from the program's own executable
 * without a stack writes nothing yet: it is written whole at its return,
 * one record instead of two (room made for it now, the ring busy from the
 * time read here, so a recorder that sees the ring idle knows the entry is
 * later than its look). */
void entry(struct fl_ring *r, int fn, void *ip, uint64_t a0,
		  uint64_t a1, uint64_t a2, uint64_t size,
		  const struct saved *s, struct call *c)
{
	uint64_t sp = entry_sp(s);
	c->time = 0;
	uint32_t words = ctrl->words;
	uint16_t flags = 0;
	uint64_t stack = 0;
	if (ctrl->stack_size && fn != FL_FN_FREE) {
		if (size >= ctrl->stack_min)
			flags = FL_F_STACK_BIG;
		else if (++ts.count >= ctrl->stack_every) {
			ts.count = 0;
			flags = FL_F_STACK_SMALL;
		}
		if (flags)
			stack = stack_room(sp);
	}
	if (!flags && fn != FL_FN_FREE && own_code(*(const uint64_t *)sp)) {
		if (whole(fn)) {
			/* -1: recording stopped while this thread waited for
			 * room; the call goes unrecorded, without a second wait
			 * for a short entry's room. */
			if (make_room(r, CALL_BYTES) < 0)
				return;
			ts.calls++;
			__atomic_store_n(&r->busy, FL_BUSY_CALL, __ATOMIC_RELAXED);
			c->time = now_ns();
			c->a0 = a0;
			c->a1 = a1;
			c->sp = sp;
			return;
		}
		flags = FL_F_SHORT;
		words = 1;
	}
	uint32_t nwords = words; /* carried: past the stack's top, zeros */
	if (ts.stack_hi && sp + 8 * words > ts.stack_hi)
		words = sp < ts.stack_hi ? (uint32_t)((ts.stack_hi - sp) / 8) : 0;
	uint32_t size_ = sizeof(struct fl_rec) + sizeof(struct fl_entry) +
			 8 * nwords;
	if (flags & (FL_F_STACK_BIG | FL_F_STACK_SMALL))
		size_ += stack_bytes(stack);
	struct fl_rec *rec = begin(r, size_);
	if (!rec)
		return;
	rec->kind = FL_ENTRY;
	rec->fn = (uint8_t)fn;
	rec->flags = flags;
	struct fl_entry *e = (struct fl_entry *)(rec + 1);
	e->ip = (uint64_t)ip;
	e->args[0] = a0;
	e->args[1] = a1;
	e->args[2] = a2;
	e->sp = sp;
	e->bp = s->rbp;
	uint64_t *w = (uint64_t *)(e + 1);
	memcpy(w, (void *)sp, 8 * words);
	memset(w + words, 0, 8 * (nwords - words));
	if (flags & (FL_F_STACK_BIG | FL_F_STACK_SMALL)) {
		/* The record shrinks to the bytes copied (still uncommitted). */
		uint64_t got = put_stack((struct fl_regs *)(w + nwords), s, sp, ip, stack);
		rec->size -= stack_bytes(stack) - stack_bytes(got);
	}
	commit(r, rec);
}

/* put_return writes a return's first four fields, which a whole call's
 * record (fl_call) starts with too: ip, ptr, hdr, ret_ip. */
static inline void put_return(uint64_t *x, void *ip, void *ptr,
			      const struct saved *s)
{
	x[0] = (uint64_t)ip;
	x[1] = (uint64_t)ptr;
	/* glibc's chunk header (size and flags) is the word before the
	 * pointer; malloc wrote it, so reading it faults nothing. */
	x[2] = glibc && ctrl->glibc && ptr ? ((const uint64_t *)ptr)[-1] : 0;
	x[3] = *(const uint64_t *)entry_sp(s);
}

void ret(struct fl_ring *r, int fn, void *ip, void *ptr, uint64_t status,
		const struct saved *s)
{
	struct fl_rec *rec = begin(r, sizeof(struct fl_rec) + sizeof(struct fl_return));
	if (!rec)
		return;
	rec->kind = FL_RETURN;
	rec->fn = (uint8_t)fn;
	rec->flags = 0;
	struct fl_return *x = (struct fl_return *)(rec + 1);
	put_return(&x->ip, ip, ptr, s);
	x->status = status;
	commit(r, rec);
}

/* whole_ret writes a call recorded whole (entry() kept its entry in c). */
void whole_ret(struct fl_ring *r, int fn, void *ip, void *ptr,
		      const struct saved *s, const struct call *c)
{
	struct fl_rec *rec = begin(r, CALL_BYTES);
	ts.calls--; /* before commit, which leaves the ring busy while any is left */
	if (!rec)
		return; /* wait_room gave up, and left the ring not busy */
	rec->kind = FL_CALL;
	rec->fn = (uint8_t)fn;
	rec->flags = FL_F_SHORT;
	struct fl_call *x = (struct fl_call *)(rec + 1);
	put_return(&x->ip, ip, ptr, s);
	x->entry_time = c->time;
	x->args[0] = c->a0;
	x->args[1] = c->a1;
	x->sp = c->sp;
	commit(r, rec);
}

