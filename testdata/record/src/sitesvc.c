/* sitesvc.c — a service whose work is the same in every process that runs
 * it, for comparing a recording attached to it (record -p) with one of the
 * same work launched (record -- sitesvc once).
 *
 *   sitesvc [once]
 *
 * The main thread waits for SIGUSR1 (with "once" it sends the signal to
 * itself first and exits after the work). On it, the work: two threads
 * are started and joined, each allocating at its sites and writing every
 * byte it allocated (page faults), while the main thread allocates at one
 * site of its own; then everything is freed and the main thread prints
 *
 *   round N calls C minflt F
 *
 * C being the allocator calls the work made (mallocs, callocs, reallocs)
 * and F the minor faults the process took during it (getrusage).
 *
 * The sites, and the faults of a first round (4 KiB pages, no huge pages:
 * the program turns them off for itself):
 *   big_blocks     6 × malloc(4 MiB), mmap'd: 1025 pages each (the
 *                  chunk's header page and 4 MiB)
 *   zeroed_blocks  10 × calloc(64, 4096), mmap'd: 65 pages each
 *   mid_blocks     300 × malloc(40000) in a thread's arena: ~2930 pages
 *   small_blocks   20000 × malloc(200): 208-byte chunks, ~1016 pages
 *   grown_buffer   a buffer doubled by realloc from 4 KiB to 4 MiB
 *   tiny_blocks    1500 × malloc(40): 48-byte chunks, ~18 pages
 *   table_rows     100 × malloc(3000) by the main thread, in the main
 *                  arena: ~74 pages
 * All the work's memory is allocated after the signal: an attached
 * recording that starts before it sees every call.
 * The mmap threshold is fixed at 128 KiB (mallopt), so that a free of
 * an mmap'd block does not raise it, and a later round's blocks are
 * placed as the first round's were. Only the first round's faults match a
 * launched run's: later rounds reuse heap memory the first one touched.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#define NBIG 6
#define NZERO 10
#define NMID 300
#define NSMALL 20000
#define NTINY 1500
#define NROWS 100

static void *big[NBIG], *zero[NZERO], *mid[NMID], *small[NSMALL], *tiny[NTINY], *rows[NROWS];
static void *grown;
static long grows;

/* fill writes every byte of [p, p+n): every page is touched. */
static void fill(void *p, size_t n)
{
	memset(p, 1, n);
	__asm__ volatile("" : : "r"(p) : "memory");
}

__attribute__((noinline)) static void big_blocks(void)
{
	for (int i = 0; i < NBIG; i++) {
		big[i] = malloc(4 << 20);
		fill(big[i], 4 << 20);
	}
}

__attribute__((noinline)) static void zeroed_blocks(void)
{
	for (int i = 0; i < NZERO; i++) {
		zero[i] = calloc(64, 4096);
		fill(zero[i], 64 * 4096);
	}
}

__attribute__((noinline)) static void mid_blocks(void)
{
	for (int i = 0; i < NMID; i++) {
		mid[i] = malloc(40000);
		fill(mid[i], 40000);
	}
}

__attribute__((noinline)) static void small_blocks(void)
{
	for (int i = 0; i < NSMALL; i++) {
		small[i] = malloc(200);
		fill(small[i], 200);
	}
}

__attribute__((noinline)) static void grown_buffer(void)
{
	size_t n = 4096;
	grown = malloc(n);
	fill(grown, n);
	grows = 1;
	while (n < (4 << 20)) {
		void *p = realloc(grown, 2 * n);
		if (!p)
			abort();
		grown = p;
		fill((char *)grown + n, n);
		n *= 2;
		grows++;
	}
}

__attribute__((noinline)) static void tiny_blocks(void)
{
	for (int i = 0; i < NTINY; i++) {
		tiny[i] = malloc(40);
		fill(tiny[i], 40);
	}
}

__attribute__((noinline)) static void table_rows(void)
{
	for (int i = 0; i < NROWS; i++) {
		rows[i] = malloc(3000);
		fill(rows[i], 3000);
	}
}

static void *large_work(void *arg)
{
	(void)arg;
	big_blocks();
	mid_blocks();
	return NULL;
}

static void *small_work(void *arg)
{
	(void)arg;
	small_blocks();
	zeroed_blocks();
	tiny_blocks();
	grown_buffer();
	return NULL;
}

static void free_all(void **p, int n)
{
	for (int i = 0; i < n; i++)
		free(p[i]);
}

static long minflt(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return u.ru_minflt;
}

int main(int argc, char **argv)
{
	int once = argc > 1 && strcmp(argv[1], "once") == 0;
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	setvbuf(stdout, NULL, _IOLBF, 0);
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	/* Blocked before any thread exists: only sigwait takes it. */
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	printf("ready\n");
	if (once)
		raise(SIGUSR1);
	for (int round = 1;; round++) {
		int sig;
		if (sigwait(&usr1, &sig) != 0)
			return 1;
		long f0 = minflt();
		pthread_t a, b;
		if (pthread_create(&a, NULL, large_work, NULL) != 0 ||
		    pthread_create(&b, NULL, small_work, NULL) != 0)
			return 1;
		table_rows();
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		long calls = NBIG + NZERO + NMID + NSMALL + NTINY + NROWS + grows;
		free_all(big, NBIG);
		free_all(zero, NZERO);
		free_all(mid, NMID);
		free_all(small, NSMALL);
		free_all(tiny, NTINY);
		free_all(rows, NROWS);
		free(grown);
		printf("round %d calls %ld minflt %ld\n", round, calls, minflt() - f0);
		if (once)
			return 0;
	}
}
