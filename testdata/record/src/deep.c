/*
 * deep: allocations at every level of a recursion DEPTH frames deep, in
 * the main thread and in a second thread — the stack-copy acceptance
 * program. A sampled allocation's stack reaches its root frame (_start in
 * the main thread, clone3 in the other) only if the recorder copied the
 * stack from the stack pointer up to the top of the thread's stack: each
 * frame of descend holds 64 bytes of its own, so 200 of them take some
 * 16 KiB, more than perf's 8 KiB default.
 *
 * The size of each allocation says how deep it was made, so a test can
 * check an unwound stack by arithmetic: at depth d (d frames of descend
 * on the stack, 1..DEPTH) the program mallocs 64 + 8·d bytes, and at the
 * bottom of each descent also 65536 + 64 + 8·DEPTH bytes (at least
 * --stack-min: every one gets a stack).
 *
 * With a third argument FILE it writes there the second thread's
 * pthread_t in hex: with glibc on x86-64 the address of the thread's
 * control block, its thread pointer, which the C library put at the top
 * of the thread's stack block, above the stack.
 *
 * usage: deep [DEPTH [ROUNDS [FILE]]]   (default 200 100)
 * Allocator calls per thread: ROUNDS × (DEPTH + 1) mallocs and as many
 * frees, plus start-up's.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int depth = 200, rounds = 100;

/* Through a volatile pointer, so that the compiler cannot elide a pair. */
static char *volatile keep;

static __attribute__((noinline)) void descend(int d)
{
	volatile char frame[64];
	frame[0] = (char)d;
	char *p = malloc(64 + 8 * (size_t)d);
	keep = p;
	if (d < depth) {
		descend(d + 1);
	} else {
		char *big = malloc(65536 + 64 + 8 * (size_t)d);
		keep = big;
		free(big);
	}
	p[0] = frame[0]; /* not a tail call: the frame stays below the next */
	free(p);
}

static __attribute__((noinline)) void *worker(void *arg)
{
	for (int r = 0; r < rounds; r++)
		descend(1);
	return arg;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		depth = atoi(argv[1]);
	if (argc > 2)
		rounds = atoi(argv[2]);
	if (depth < 1 || rounds < 0)
		return 2;
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	worker(NULL);
	if (pthread_join(t, NULL) != 0)
		return 1;
	if (argc > 3) {
		/* Without stdio, whose buffers would be allocations of their own. */
		char line[32];
		int n = snprintf(line, sizeof line, "%#lx\n", (unsigned long)t);
		int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, line, (size_t)n) != n || close(fd) != 0)
			return 1;
	}
	return 0;
}
