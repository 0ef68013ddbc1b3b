/*
 * alloc.c — one program for every allocator family: 20000 x malloc(512) kept live, each
 * touched once, then an 8 MiB buffer touched page by page.
 *
 * Expected under every allocator (testdata/alloc/README.md has the
 * arithmetic): fill_small (line 19) 20000 allocations; big_buffer (line
 * 26) 1 allocation and 8 MiB / 4 KiB = 2048 faults on its pages.
 */
#include <stdlib.h>

#define N 20000
#define BIG (8 << 20)

static char *small[N];

__attribute__((noinline)) static void fill_small(void)
{
	for (int i = 0; i < N; i++) {
		small[i] = malloc(512);
		small[i][0] = 1;
	}
}

__attribute__((noinline)) static char *big_buffer(void)
{
	char *b = malloc(BIG);
	for (long off = 0; off < BIG; off += 4096)
		b[off] = 1;
	return b;
}

int main(void)
{
	fill_small();
	char *b = big_buffer();
	int s = b[4096] + small[N - 1][0];
	free(b);
	for (int i = 0; i < N; i++)
		free(small[i]);
	return s == 2 ? 0 : 1;
}
