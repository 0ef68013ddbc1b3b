/*
 * threads: three pthreads, each allocating and touching its own block in its
 * own malloc arena, plus one block in the main thread.
 *
 * Run through launch (THP off, no ASLR). Each worker's first malloc gives it
 * a new thread arena (glibc 2.36: a 64 MiB-aligned heap mmap'd PROT_NONE and
 * opened with mprotect; its chunks are not IS_MMAPPED). A barrier after the
 * touches keeps every worker alive until all have allocated, so no worker
 * can pick up an exited worker's arena from the free list: exactly one
 * arena per worker, whatever the scheduling.
 *
 * Same heap-chunk rule as basic.c: a k-page block that does not start on a
 * page boundary has its first and last spanned page mapped by malloc's own
 * header writes, so touching one byte per page from p[0] faults k-1 times.
 *
 * Site          thread    call     size    #  faults after return
 * main_alloc    main      malloc   16384   1  3   (4 pages: k-1)
 * worker_alloc  worker 0  malloc   16384   1  3   (4 pages: k-1)
 * worker_alloc  worker 1  malloc   32768   1  7   (8 pages: k-1)
 * worker_alloc  worker 2  malloc   49152   1  11  (12 pages: k-1)
 *
 * Workers are told apart by size (and by tid in the recording: worker i is
 * the i-th thread created). Faults of a worker's block happen on the
 * worker's tid. pthread_create itself allocates the thread's DTV with calloc
 * (not seen by the malloc probes) and the stacks with mmap (not malloc).
 */
#include <pthread.h>
#include <stdlib.h>
#include "fixture.h"

void *volatile fixture_sink;

#define NWORKERS 3

static pthread_barrier_t done;

__attribute__((noinline, noclone)) char *main_alloc(void)
{
	char *p = malloc(4 * PAGE);
	keep(p);
	touch_stride(p, 4 * PAGE);
	return p;
}

__attribute__((noinline, noclone)) char *worker_alloc(int pages)
{
	char *p = malloc((size_t)pages * PAGE);
	keep(p);
	touch_stride(p, (size_t)pages * PAGE);
	return p;
}

static void *worker(void *arg)
{
	int i = (int)(long)arg;
	char *p = worker_alloc(4 * (i + 1));
	pthread_barrier_wait(&done);
	return p;
}

int main(void)
{
	pthread_t t[NWORKERS];
	main_alloc();
	pthread_barrier_init(&done, NULL, NWORKERS);
	for (long i = 0; i < NWORKERS; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
			return 1;
	for (int i = 0; i < NWORKERS; i++)
		pthread_join(t[i], NULL);
	return 0;
}
