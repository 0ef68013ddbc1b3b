/*
 * clock.h — the time a record is stamped with (clock.c says how).
 */
#ifndef FAULTLINE_CLOCK_H
#define FAULTLINE_CLOCK_H

#include "shim.h"

extern int use_tsc;        /* ctrl->tsc, until the counter jumps */
extern uint64_t tsc_mul;   /* ns per tick << 32; 0: not known (yet) */
extern uint64_t tsc_recal; /* FL_TSC_RECAL_NS in ticks */

static inline uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline uint64_t tsc_read(void) { return __builtin_ia32_rdtsc(); }

uint64_t tsc_calibrate(void);
void tsc_off(void);

/* now_ns returns the time to stamp a record of this thread with (it has
 * a ring: ts.ring). */
static inline uint64_t now_ns(void)
{
	uint64_t t;
	uint64_t mul = __atomic_load_n(&tsc_mul, __ATOMIC_RELAXED);
	uint64_t d = mul ? tsc_read() - ts.cal_c : 0;
	if (likely(mul) && d < __atomic_load_n(&tsc_recal, __ATOMIC_RELAXED))
		t = ts.cal_m + (uint64_t)(((unsigned __int128)d * mul) >> 32);
	else if (__atomic_load_n(&use_tsc, __ATOMIC_RELAXED))
		t = tsc_calibrate();
	else {
		t = mono_ns();
		ts.ring->clock_reads++;
	}
	if (t < ts.last)
		t = ts.last;
	ts.last = t;
	return t;
}

#endif
