/*
 * heapgrow: many small mallocs that grow the brk heap, and one large mmap'd
 * buffer (checks that the faults malloc takes while growing the heap belong to
 * the call it serves).
 *
 * Run through testdata/src/launch.c (THP off, no ASLR).
 *
 * many_small: 100000 x malloc(64) + memset of the 64 bytes. Each request is
 * an 80-byte chunk (glibc x86-64: max(32, (64 + 8 + 15) & ~15)), carved
 * from the top chunk; splitting the top writes the new top's size word at
 * ptr + 72, past the 64 bytes the caller gets, so every fresh heap page is
 * first touched *inside malloc*. 100000 x 80 B = 8,000,000 B of heap =
 * 1953.1 pages, plus the first call's tcache setup (a 0x290-byte chunk at
 * the heap's start, made inside that call): 1954 pages, all faulted inside
 * malloc. Expected at the site: 1953 +- 2%, flag fast (64 <= 128).
 *
 * big_buffer: malloc(8 MiB), mmap'd (above the 128 KiB threshold): 8 MiB +
 * 16 B header = 2049 pages from the chunk's page; malloc writes the header
 * on page 0 (inside malloc, in the chunk), the loop writes one byte per
 * 4 KiB from p[0], i.e. pages 0..2047, 1..2047 after return: 1 + 2047 =
 * 2048 faults, flag mmap. It runs after many_small, so the tcache setup is
 * not in its call.
 *
 * Nothing is freed (freeing an mmap'd chunk would raise the mmap threshold).
 */
#include <stdlib.h>
#include <string.h>

#define N 100000
#define BIG (8u << 20)
#define PAGE 4096

static void *v[N];
void *volatile sink;

__attribute__((noinline, noclone)) static void many_small(void)
{
	for (int i = 0; i < N; i++) {
		v[i] = malloc(64);
		memset(v[i], 0xab, 64);
	}
	sink = v;
}

__attribute__((noinline, noclone)) static void big_buffer(void)
{
	char *p = malloc(BIG);
	for (size_t off = 0; off < BIG; off += PAGE)
		((volatile char *)p)[off] = 1;
	sink = p;
}

int main(void)
{
	many_small();
	big_buffer();
	return 0;
}
