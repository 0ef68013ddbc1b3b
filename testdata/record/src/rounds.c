/*
 * rounds: one allocation site whose page faults are spread evenly over the
 * run, for the cut-short-recording test. ROUNDS times: malloc a
 * 1 MiB block, write one byte per page, free it. M_MMAP_THRESHOLD set by
 * mallopt stops glibc raising the threshold when the first block is freed,
 * so every block is a fresh mmap'd chunk: 256 pages, each faulting once
 * (THP off), all on that round's block. A recording cut at x% of its
 * length holds about x% of them.
 *
 * usage: rounds [ROUNDS]   (default 200)
 */
#include <malloc.h>
#include <stdlib.h>

__attribute__((noinline)) static char *touch_block(size_t len)
{
	char *p = malloc(len);
	if (!p)
		exit(1);
	for (size_t off = 0; off < len; off += 4096)
		((volatile char *)p)[off] = 1;
	return p;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 200;
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	for (int r = 0; r < rounds; r++)
		free(touch_block(1 << 20));
	return 0;
}
