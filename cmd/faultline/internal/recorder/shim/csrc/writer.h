/*
 * writer.h — the records an allocator call is written as (writer.c).
 */
#ifndef FAULTLINE_WRITER_H
#define FAULTLINE_WRITER_H

#include "ring.h"

/* A call between its entry and its return. time != 0: its entry wrote
 * nothing, the call is written whole at its return (FL_CALL) with the
 * entry's time, arguments and stack pointer kept here. */
struct call {
	uint64_t time, a0, a1, sp;
};

#define CALL_BYTES (sizeof(struct fl_rec) + sizeof(struct fl_call))

void entry(struct fl_ring *r, int fn, void *ip, uint64_t a0, uint64_t a1,
	   uint64_t a2, uint64_t size, const struct saved *s, struct call *c);
void ret(struct fl_ring *r, int fn, void *ip, void *ptr, uint64_t status,
	 const struct saved *s);
void whole_ret(struct fl_ring *r, int fn, void *ip, void *ptr,
	       const struct saved *s, const struct call *c);

/* returned records a call's return on ring r, if this thread still
 * records into r (not after a fork in the call, say). The errno the
 * allocator left stays: only the slow paths make system calls that can
 * change it, and they keep it (ring_claim, wait_room, populate). */
static inline void returned(struct fl_ring *r, int fn, void *ip, void *ptr,
			    uint64_t status, const struct saved *s,
			    const struct call *c)
{
	if (ring() == r) {
		if (c->time)
			whole_ret(r, fn, ip, ptr, s, c);
		else
			ret(r, fn, ip, ptr, status, s);
		done();
	} else if (c->time && ts.ring == r && ts.calls && !--ts.calls) {
		/* Not recorded (the recorder stopped): not busy either. */
		__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
	}
}

/* write_free records a free of p on ring r (between ring() and done()):
 * ip is the function that frees it. Every free is written as free's. */
static inline void write_free(struct fl_ring *r, void *ip, void *p)
{
	struct fl_rec *rec = begin(r, sizeof(struct fl_rec) + sizeof(struct fl_free));
	if (rec) {
		rec->kind = FL_FREE;
		rec->fn = FL_FN_FREE;
		rec->flags = 0;
		struct fl_free *f = (struct fl_free *)(rec + 1);
		f->ip = (uint64_t)ip;
		f->ptr = (uint64_t)p;
		commit(r, rec);
	}
}

#endif
