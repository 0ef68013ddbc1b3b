/*
 * service: a long-running, allocation-heavy, multi-threaded program that
 * counts its own allocator calls, for record's tests of a running process
 * (record -p, containers, --every windows).
 *
 * THREADS threads each call malloc at RATE calls a second in all (paced
 * in batches of 100, so the calls are spread evenly over each second).
 * Each call comes from one of three sites: alloc_small (64 bytes, freed
 * at once: 74 of each 100 calls), alloc_page (4096 bytes, written whole,
 * kept live in a ring of 256 slots per thread, the oldest freed when its
 * slot is reused: 25 of 100) and alloc_big (256 KiB, above the mmap
 * threshold, which main fixes at 128 KiB so that it stays there: mmap'd,
 * written whole and freed, 64 page faults each: 1 of 100). So the service
 * holds about THREADS * 1 MiB at any time and faults 64 pages per 100
 * calls.
 *
 * Every REPORT_MS milliseconds the main thread prints one line:
 *
 *   t=<CLOCK_MONOTONIC ns> pid=<getpid()> allocs=<mallocs so far> frees=<frees so far>
 *
 * the counts being the calls its threads made by then (each thread bumps
 * its counter right after its malloc returns). The pid is the one the
 * process sees: in a PID namespace, not the host's. It runs until killed.
 *
 * usage: service [THREADS [RATE [REPORT_MS]]]   (defaults 2 20000 1000)
 */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING 256
#define BATCH 100

struct worker {
	pthread_t th;
	long rate; /* calls a second for this thread */
	_Atomic unsigned long allocs, frees;
	char *ring[RING];
};

static unsigned long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long)ts.tv_sec * 1000000000ul + (unsigned long)ts.tv_nsec;
}

__attribute__((noinline)) static char *alloc_small(void)
{
	char *p = malloc(64);
	/* escapes: the compiler may not remove the pair */
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

__attribute__((noinline)) static char *alloc_big(void)
{
	char *p = malloc(256 << 10);
	if (p)
		memset(p, 2, 256 << 10);
	return p;
}

__attribute__((noinline)) static char *alloc_page(void)
{
	char *p = malloc(4096);
	if (p)
		memset(p, 1, 4096);
	return p;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	unsigned long start = now_ns(), done = 0;
	unsigned slot = 0;
	for (;;) {
		for (int i = 0; i < BATCH; i++) {
			if (i == BATCH - 1) {
				char *p = alloc_big();
				atomic_fetch_add(&w->allocs, 1);
				free(p);
				atomic_fetch_add(&w->frees, 1);
			} else if (i % 4 == 0) {
				char *p = alloc_page();
				atomic_fetch_add(&w->allocs, 1);
				if (w->ring[slot]) {
					free(w->ring[slot]);
					atomic_fetch_add(&w->frees, 1);
				}
				w->ring[slot] = p;
				slot = (slot + 1) % RING;
			} else {
				char *p = alloc_small();
				atomic_fetch_add(&w->allocs, 1);
				free(p);
				atomic_fetch_add(&w->frees, 1);
			}
		}
		done += BATCH;
		/* the time the calls so far are due at this rate */
		unsigned long due = start + done * 1000000000ul / (unsigned long)w->rate;
		unsigned long t = now_ns();
		if (due > t) {
			struct timespec ts = {(time_t)((due - t) / 1000000000ul), (long)((due - t) % 1000000000ul)};
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 2;
	long rate = argc > 2 ? atol(argv[2]) : 20000;
	long report = argc > 3 ? atol(argv[3]) : 1000;
	if (threads < 1 || rate < threads || report < 1) {
		fprintf(stderr, "usage: service [THREADS [RATE [REPORT_MS]]]\n");
		return 2;
	}
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	struct worker *ws = calloc((size_t)threads, sizeof *ws);
	for (int i = 0; i < threads; i++) {
		ws[i].rate = rate / threads;
		pthread_create(&ws[i].th, NULL, work, &ws[i]);
	}
	unsigned long next = now_ns();
	for (;;) {
		next += (unsigned long)report * 1000000ul;
		struct timespec ts = {(time_t)(next / 1000000000ul), (long)(next % 1000000000ul)};
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		unsigned long a = 0, f = 0;
		for (int i = 0; i < threads; i++) {
			a += atomic_load(&ws[i].allocs);
			f += atomic_load(&ws[i].frees);
		}
		printf("t=%lu pid=%d allocs=%lu frees=%lu\n", now_ns(), (int)getpid(), a, f);
		fflush(stdout);
	}
}
