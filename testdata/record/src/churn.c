/*
 * churn: calls malloc and free in a tight loop, deterministically — the
 * recorder's throughput acceptance program. Natively it makes
 * well over a million allocator calls per second; each iteration frees one
 * of 64 live blocks and mallocs a new one of 16..496 bytes, so the compiler
 * cannot drop the pair. Every BIG_EVERY-th iteration also mallocs and frees
 * a 64 KiB block (>= --stack-min: every one gets a stack).
 *
 * usage: churn [ITERATIONS]   (default 2000000)
 * Allocator calls: 2 per iteration + 2 per 1000 iterations, + 64 frees at
 * the end, + whatever ld.so and libc do at start-up (constant).
 */
#include <stdlib.h>
#include <string.h>

#define BIG_EVERY 1000

/* Through a volatile pointer, so that the compiler cannot elide the pair. */
static char *volatile keep;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	static char *ring[64];
	for (long i = 0; i < n; i++) {
		free(ring[i % 64]);
		ring[i % 64] = malloc(16 + (i % 61) * 8);
		ring[i % 64][0] = 1;
		if (i % BIG_EVERY == 0) {
			keep = malloc(64 << 10);
			memset(keep, 1, 64);
			free(keep);
		}
	}
	for (int i = 0; i < 64; i++)
		free(ring[i]);
	return 0;
}
