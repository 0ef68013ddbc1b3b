/* attachsvc.c — a long-running multi-threaded allocation-heavy service for
 * record -p's attach tests. Every second it prints its allocator calls in
 * that second and in all ("sec N calls C total T usr1 U burst B").
 *
 *   attachsvc [WORKERS [CALLS_PER_SEC [busy]]]   (CALLS_PER_SEC 0: as fast as
 *                                                it can; busy: the main
 *                                                thread allocates too)
 *
 * Besides the workers (each round frees one of its 256 live blocks and
 * mallocs 16..4111 bytes in its place: two calls), threads keep the awkward states an attach must meet: one
 * dlopens and dlcloses libm (the loader's lock), one creates and joins
 * short-lived threads, one sleeps in read() on a pipe nobody writes.
 * SIGUSR1 makes a thread allocate BURST (1000) blocks of 12345 bytes (and
 * free them), counted in "burst", so a recording can be checked against
 * the service's own count; "usr1" counts the signals received (SIGUSR1
 * and SIGRTMIN, which queues: each one sent arrives).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BURST 1000
#define LIVE 256 /* blocks each worker keeps */

static atomic_ulong calls, usr1, bursts;
static volatile sig_atomic_t pending;
static long rate; /* per worker per second, 0: unlimited */

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* cputime is the CPU time the process used, in seconds. */
static double cputime(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	double start = now();
	unsigned long done = 0;
	/* Live blocks, replaced at random: the pointers escape, so the
	 * compiler keeps every call. */
	void **live = calloc(LIVE, sizeof *live);
	for (;;) {
		unsigned r = rand_r(&seed);
		void **slot = &live[r % LIVE];
		free(*slot);
		*slot = malloc(16 + r / LIVE % 4096);
		memset(*slot, 1, 16);
		atomic_fetch_add_explicit(&calls, 2, memory_order_relaxed);
		done += 2;
		if (rate && done % 64 == 0) {
			double ahead = done / (double)rate - (now() - start);
			if (ahead > 0) {
				struct timespec t = {0, (long)(ahead * 1e9)};
				nanosleep(&t, NULL);
			}
		}
	}
	return NULL;
}

static void *loader(void *arg)
{
	(void)arg;
	for (;;) {
		void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
		if (h)
			dlclose(h);
		usleep(1000);
	}
	return NULL;
}

static void *brief(void *arg)
{
	return malloc((size_t)(uintptr_t)arg);
}

static void *spawner(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_t t;
		void *p;
		if (pthread_create(&t, NULL, brief, (void *)(uintptr_t)100) == 0) {
			pthread_join(t, &p);
			free(p);
		}
		usleep(2000);
	}
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	int p[2];
	char b;
	if (pipe(p) == 0)
		while (read(p[0], &b, 1) != 0)
			;
	return NULL;
}

static void on_usr1(int sig)
{
	atomic_fetch_add(&usr1, 1);
	if (sig == SIGUSR1)
		pending = 1;
}

static void *burster(void *arg)
{
	(void)arg;
	static void *blocks[BURST];
	for (;;) {
		if (!pending) {
			usleep(1000);
			continue;
		}
		pending = 0;
		for (int i = 0; i < BURST; i++) {
			blocks[i] = malloc(12345);
			memset(blocks[i], 2, 64);
		}
		for (int i = 0; i < BURST; i++)
			free(blocks[i]);
		atomic_fetch_add(&bursts, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int workers = argc > 1 ? atoi(argv[1]) : 4;
	long total = argc > 2 ? atol(argv[2]) : 0;
	int busy = argc > 3 && strcmp(argv[3], "busy") == 0;
	rate = workers > 0 ? total / workers : 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGUSR1, on_usr1);
	signal(SIGRTMIN, on_usr1); /* queued: each one sent is counted */
	pthread_t t;
	for (int i = 0; i < workers; i++)
		pthread_create(&t, NULL, worker, (void *)(uintptr_t)(i + 1));
	pthread_create(&t, NULL, loader, NULL);
	pthread_create(&t, NULL, spawner, NULL);
	pthread_create(&t, NULL, sleeper, NULL);
	pthread_create(&t, NULL, burster, NULL);
	unsigned long last = 0;
	double cpu0 = cputime();
	void *live[LIVE] = {0};
	unsigned seed = 7;
	double next = now() + 1;
	for (int sec = 1;; sec++, next += 1) {
		if (!busy) {
			sleep(1);
		} else {
			/* The main thread allocates too: every thread is in the
			 * allocator most of the time. */
			for (unsigned long k = 0; k % 1024 || now() < next; k++) {
				unsigned r = rand_r(&seed);
				void **slot = &live[r % LIVE];
				free(*slot);
				*slot = malloc(16 + r / LIVE % 4096);
				atomic_fetch_add_explicit(&calls, 2, memory_order_relaxed);
			}
		}
		unsigned long c = atomic_load(&calls);
		double cpu = cputime();
		printf("sec %d calls %lu total %lu usr1 %lu burst %lu cpu %.3f\n", sec, c - last, c,
		       atomic_load(&usr1), atomic_load(&bursts), cpu - cpu0);
		last = c;
		cpu0 = cpu;
	}
}
