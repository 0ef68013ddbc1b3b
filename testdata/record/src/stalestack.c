/* stalestack.c — a process whose main thread is never at a safe point
 * for an injection: it sleeps in pause() with malloc's address in a live
 * stack slot (as a word an earlier call left there would be), which the
 * injection's stack check cannot tell from a return into malloc. Its
 * other thread allocates and frees a block every millisecond, and sleeps
 * in between: record -p must attach in-process through that thread.
 *
 *   stalestack
 *
 * It prints "ready" once the thread runs, and runs until killed.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *worker(void *arg)
{
	(void)arg;
	struct timespec ms = {0, 1000 * 1000};
	for (;;) {
		char *volatile p = malloc(4321);
		p[0] = 1;
		free(p);
		nanosleep(&ms, NULL);
	}
	return NULL;
}

int main(void)
{
	/* Live for as long as main runs: the stack check sees it. */
	volatile uintptr_t slot[4] = {(uintptr_t)malloc, (uintptr_t)free, 0, 0};
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
	return (int)slot[2];
}
