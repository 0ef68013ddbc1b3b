/*
 * ring.h — the ring protocol's fast path: a thread's ring, room in it,
 * and writing a record (begin, commit). ring.c holds the rest.
 */
#ifndef FAULTLINE_RING_H
#define FAULTLINE_RING_H

#include "clock.h"

extern uint32_t gen; /* bumped in a forked child: rings are per process */

/* How much of a ring is populated at a time: a thread that makes few
 * calls touches little of its ring, and one that fills it maps each step
 * in one system call, not a page fault per page. */
#define FL_POP_STEP (256u << 10)

/* How far ahead of a record begin asks for the ring's bytes: 16 cache
 * lines, about seven calls. */
#define FL_PREFETCH 1024

long futex(uint32_t *w, int op, uint32_t val, const struct timespec *t);
void ring_claim(uint32_t g);
int wait_room(struct fl_ring *r, uint64_t need);
void populate_more(struct fl_ring *r, uint64_t need);

/* ring returns this thread's ring, claiming one at its first call (and
 * again after fork), or NULL when the call is not to be recorded. On
 * success the shim is marked running (ts.depth); the caller calls done(). */
static inline struct fl_ring *ring(void)
{
	if (unlikely(__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2))
		init();
	struct fl_ctrl *c = __atomic_load_n(&ctrl, __ATOMIC_ACQUIRE);
	if (!c)
		return NULL;
	if (unlikely(ts.depth)) {
		/* The shim's own work calling the allocator, or a signal
		 * handler that interrupted the shim: either way the ring is
		 * mid-record (or being claimed) and this call cannot be
		 * written. A handler's call during the thread's claim has no
		 * ring to count in: it counts as unrecorded. */
		if (ts.own) {
			if (ts.ring)
				ts.ring->nested++;
		} else if (ts.ring) {
			ts.ring->interrupted++;
		} else {
			__atomic_add_fetch(&c->unrecorded, 1, __ATOMIC_RELAXED);
		}
		return NULL;
	}
	if (unlikely(__atomic_load_n(&c->detached, __ATOMIC_RELAXED)))
		return NULL;
	if (unlikely(__atomic_load_n(&c->abandoned, __ATOMIC_RELAXED))) {
		__atomic_add_fetch(&c->unrecorded, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	uint32_t g = __atomic_load_n(&gen, __ATOMIC_RELAXED);
	if (unlikely(ts.gen != g))
		ring_claim(g);
	if (unlikely(ts.off)) {
		__atomic_add_fetch(&c->unrecorded, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	ts.depth++;
	return ts.ring;
}

static inline void done(void) { ts.depth--; }

/* make_room makes the ring hold size more bytes at head (and the pad
 * that would take it to the ring's start), populated, waiting for room if
 * need be; it returns the pad, or -1 when recording must stop. */
static inline int64_t make_room(struct fl_ring *r, uint32_t size)
{
	uint32_t rb = ctrl->ring_bytes;
	uint64_t head = r->head;
	/* The bytes this record and begin's prefetch reach, populated
	 * before the time is read. */
	if (unlikely(head + size + FL_PREFETCH >= ts.pop_end))
		populate_more(r, head + size + FL_PREFETCH);
	uint32_t off = (uint32_t)head & (rb - 1);
	uint32_t pad = off + size > rb ? rb - off : 0;
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	if (unlikely(head + pad + size - tail > rb) && !wait_room(r, pad + size))
		return -1;
	return pad;
}

/* begin reserves size bytes, marks the ring busy and stamps the time;
 * commit publishes the record. Between the two nothing can be preempted
 * out of order: a recorder that sees the ring idle knows every later
 * record of it is stamped later than its look. */
static inline struct fl_rec *begin(struct fl_ring *r, uint32_t size)
{
	uint32_t rb = ctrl->ring_bytes;
	int64_t room = make_room(r, size);
	if (room < 0)
		return NULL;
	uint32_t pad = (uint32_t)room;
	uint64_t head = r->head;
	uint32_t off = (uint32_t)head & (rb - 1);
	uint8_t *data = (uint8_t *)r + FL_RING_HDR;
	if (pad) {
		struct fl_rec *p = (struct fl_rec *)(data + off);
		p->size = pad;
		p->kind = FL_PAD;
		head += pad;
		/* Seen by the recorder no earlier than the pad record itself. */
		__atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
		off = 0;
	}
	/* A plain store, not a fenced exchange: the recorder trusts a ring
	 * seen idle only for records stamped watermarkMargin (100 µs) before
	 * its look, and a store leaves the store buffer far sooner (an
	 * interrupt or preemption in between drains it). The exchange's
	 * fence waited, on every record, for the record bytes before it to
	 * reach a cache line the recorder was reading: a third of a call's
	 * time. */
	__atomic_store_n(&r->busy, ts.calls ? FL_BUSY_CALL : FL_BUSY_RECORD,
			 __ATOMIC_RELAXED);
	/* Ask for the ring's bytes FL_PREFETCH ahead, to be written: the
	 * recorder read them last, on another CPU, and a store to a line
	 * another CPU holds waits for it; asked early, the wait overlaps
	 * this call's work (PREFETCHW; a hint, it never faults). */
	__builtin_prefetch(data + ((off + FL_PREFETCH) & (rb - 1)), 1, 3);
	struct fl_rec *rec = (struct fl_rec *)(data + off);
	rec->size = size;
	rec->time = now_ns();
	return rec;
}

static inline void commit(struct fl_ring *r, struct fl_rec *rec)
{
	uint32_t rb = ctrl->ring_bytes;
	uint64_t old = r->head;
	uint64_t head = old + rec->size;
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
	__atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
	/* Still busy while a call recorded whole is in flight (a record
	 * written inside it: a memory-map call its allocator made, a signal
	 * handler's call). */
	__atomic_store_n(&r->busy, ts.calls ? FL_BUSY_CALL : FL_BUSY_NO,
			 __ATOMIC_RELEASE);
	/* Wake a sleeping recorder when the ring passes half full. */
	if (unlikely(head - tail >= rb / 2 && old - tail < rb / 2) &&
	    __atomic_load_n(&ctrl->sleeping, __ATOMIC_SEQ_CST)) {
		__atomic_add_fetch(&ctrl->wake, 1, __ATOMIC_SEQ_CST);
		futex(&ctrl->wake, FUTEX_WAKE, 1, NULL);
	}
}


#endif
