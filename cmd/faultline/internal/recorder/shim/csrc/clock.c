/*
 * clock.c — the clock.
 *
 * Records are stamped with CLOCK_MONOTONIC, the clock of the
 * page faults' perf events. Read through the vDSO it cost 28-44 ns on the
 * virtual machine this was measured on, the largest part of a recorded
 * call's own cost (three reads per malloc and free). With ctrl->tsc (the
 * recorder sets it where the kernel's own clock reads the CPU's
 * time-stamp counter and the counter runs at a constant rate) a stamp is
 * the TSC (about 11 ns) converted from the thread's last pair of readings
 * of both clocks, which it takes again whenever FL_TSC_RECAL_NS have
 * passed since. The rate (ns per tick, << 32) is measured by each thread
 * between two of its pairs FL_TSC_BASE_NS to FL_TSC_RATE_MAX_NS apart,
 * and the process converts with the last one measured: recent, it follows
 * the kernel's slewing of CLOCK_MONOTONIC. Until a rate is known, stamps
 * read CLOCK_MONOTONIC.
 *
 * A stamp so made is off by at most half the distance of the pair's two
 * TSC reads (pairs further apart than FL_TSC_PAIR_NS are not used) and
 * the rate's error over FL_TSC_RECAL_NS (a rate measured over 2 ms from
 * such pairs is good to 1e-4: 2 ns over 20 µs). A thread's stamps never
 * go back (ts.last). A pair that disagrees by more than FL_TSC_SLACK_NS
 * with the thread's previous one, if that is at most FL_TSC_CHECK_NS old
 * (a counter that jumped, or that differs between CPUs), turns the TSC
 * off for the process and is counted in ctrl->tsc_jumps: that thread's
 * stamps since its previous pair, at most FL_TSC_RECAL_NS back, may be
 * off by the jump.
 */

#include "clock.h"

#define FL_TSC_RECAL_NS 20000u
#define FL_TSC_BASE_NS 2000000u
#define FL_TSC_RATE_MAX_NS 100000000u
#define FL_TSC_PAIR_NS 200u
#define FL_TSC_SLACK_NS 1000
#define FL_TSC_CHECK_NS 100000u

int use_tsc;
uint64_t tsc_mul;
uint64_t tsc_recal;
static uint64_t tsc_gap_min = UINT64_MAX; /* the closest pair's ticks */

/* tsc_off stops every thread reading the TSC: use_tsc first, then
 * tsc_mul (tsc_calibrate relies on that order). */
void tsc_off(void)
{
	__atomic_store_n(&use_tsc, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tsc_mul, 0, __ATOMIC_SEQ_CST);
}

static void tsc_jumped(uint64_t m)
{
	tsc_off();
	if (__atomic_add_fetch(&ctrl->tsc_jumps, 1, __ATOMIC_RELAXED) == 1)
		__atomic_store_n(&ctrl->tsc_jump_time, m, __ATOMIC_RELAXED);
}

/* tsc_calibrate reads both clocks, checks the pair against the thread's
 * previous one, keeps it, measures the rate, and returns CLOCK_MONOTONIC.
 * A pair stands for its CLOCK_MONOTONIC reading at the middle of its two
 * TSC reads, so its error is up to half their distance: a call of
 * clock_gettime on cold caches (the first after a sleep) takes several
 * times longer than a warm one, and a pair that took more than twice the
 * shortest the process has seen is read again, up to three times. */
uint64_t __attribute__((noinline)) tsc_calibrate(void)
{
	uint64_t mul = __atomic_load_n(&tsc_mul, __ATOMIC_RELAXED);
	uint64_t gmin = __atomic_load_n(&tsc_gap_min, __ATOMIC_RELAXED);
	uint64_t good = gmin == UINT64_MAX ? 0 : 2 * gmin;
	uint64_t m = 0, pm = 0, c = 0, gap = UINT64_MAX;
	for (int i = 0; i < 3 && gap > good; i++) {
		uint64_t c0 = tsc_read();
		m = mono_ns();
		ts.ring->clock_reads++;
		uint64_t c1 = tsc_read();
		if (c1 >= c0 && c1 - c0 < gap) {
			gap = c1 - c0;
			pm = m;
			c = c0 + gap / 2;
		}
	}
	if (gap < gmin)
		__atomic_store_n(&tsc_gap_min, gap, __ATOMIC_RELAXED);
	/* Before the rate is known, FL_TSC_PAIR_NS cannot be told in ticks:
	 * four times the closest pair stands in for it. */
	if (gap == UINT64_MAX || (!mul && gmin != UINT64_MAX && gap > 4 * gmin) ||
	    (mul && (unsigned __int128)gap * mul >
			    (unsigned __int128)FL_TSC_PAIR_NS << 32))
		return m; /* no pair close enough: m alone */
	if (mul && ts.cal_c && pm - ts.cal_m <= FL_TSC_CHECK_NS) {
		__int128 pred = (__int128)ts.cal_m +
				(((__int128)(int64_t)(c - ts.cal_c) * mul) >> 32);
		__int128 off = pred - (__int128)pm;
		if (off > FL_TSC_SLACK_NS || off < -FL_TSC_SLACK_NS) {
			tsc_jumped(m);
			return m;
		}
	}
	ts.cal_m = pm;
	ts.cal_c = c;
	uint64_t span = pm - ts.base_m;
	if (ts.base_c && span >= FL_TSC_BASE_NS && span <= FL_TSC_RATE_MAX_NS &&
	    c > ts.base_c) {
		uint64_t nm = (uint64_t)(((unsigned __int128)span << 32) /
					 (c - ts.base_c));
		if (nm) {
			__atomic_store_n(&tsc_recal,
					 (uint64_t)(((uint64_t)FL_TSC_RECAL_NS
						     << 32) / nm),
					 __ATOMIC_RELAXED);
			__atomic_store_n(&tsc_mul, nm, __ATOMIC_SEQ_CST);
			/* tsc_off stores use_tsc, then tsc_mul: one of the
			 * two stores of 0 comes after this one. */
			if (!__atomic_load_n(&use_tsc, __ATOMIC_SEQ_CST))
				__atomic_store_n(&tsc_mul, 0, __ATOMIC_SEQ_CST);
		}
	}
	if (!ts.base_c || span >= FL_TSC_BASE_NS) {
		ts.base_m = pm;
		ts.base_c = c;
	}
	return m;
}

/* prctl(PR_SET_TSC, PR_TSC_SIGSEGV) makes RDTSC fault in the calling
 * thread and the threads it creates later: the shim stops reading the TSC
 * in every thread before the program's call, which goes straight to the
 * kernel. (A program that calls the syscall itself, not the C library's
 * prctl, is not seen: one that disables RDTSC that way is recorded with
 * --shim-clock monotonic.) */
EXPORT int prctl(int option, ...)
{
	va_list ap;
	va_start(ap, option);
	unsigned long a2 = va_arg(ap, unsigned long);
	unsigned long a3 = va_arg(ap, unsigned long);
	unsigned long a4 = va_arg(ap, unsigned long);
	unsigned long a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_TSC)
		tsc_off();
	return (int)syscall(SYS_prctl, option, a2, a3, a4, a5);
}

