/*
 * mixed: a program for recordings of faultline's own shape: the
 * allocator's range events (entry, return, free, page faults) without
 * stacks, and the malloc entry probe opened a second time with a DWARF stack
 * for only some calls. gen-mixed.sh records it with perf: the stack instances
 * take `size >= 1048576` (every big allocation, as `--stack-min`) and
 * `size == 266240` (standing in for the recorder's 1-in-N sample of smaller
 * calls: perf 6.1 cannot give a tracepoint its own sample period).
 *
 * Run through launch (THP off, no ASLR). Same glibc 2.36 rules as basic.c:
 *  - mmap'd chunk (>= 128 KiB; the threshold never rises here, nothing
 *    mmap'd is freed): ptr = page + 16, malloc writes the header at ptr-8 so
 *    page 0 faults inside malloc, inside the chunk; n bytes span
 *    ceil((n+16)/4096) pages, touch_all touches every one of them.
 *  - heap chunk of 64 KiB (16 pages, not page aligned): spans 17 pages; the
 *    first is mapped when malloc returns and so is the 17th (malloc wrote the
 *    top chunk's header there).
 *
 * Site          call (size)          #   stack?       faults per call
 * big_alloc     malloc(1048576)      1   yes (>=1M)   257 = ceil(1048592/4096), page 0 in malloc
 * node_alloc    malloc(262144)       8   no           65  = ceil(262160/4096), page 0 in malloc
 *               (from_a 6, from_b 2)
 * node_alloc    malloc(266240)       4   yes (==)     66  = ceil(266256/4096), page 0 in malloc
 *               (from_a 3, from_b 1)
 * reuse_old     malloc(65536)        1   no           0 after return (touches page 0 only)
 * reuse_block   malloc(32)           1   no           0 (blocker: keeps reuse_old's chunk out of top)
 * reuse_new     malloc(65536)        1   no           15: glibc hands back reuse_old's freed chunk
 *                                                     (exact fit from the unsorted bin, same
 *                                                     address); pages 1..15 were never touched
 * uaf_alloc     malloc(65536)        1   no           0 after return (page 0 only)
 * uaf_block     malloc(32)           1   no           0 (blocker)
 * uaf_touch     (no allocation)      -   -            15: writes pages 1..16 of uaf_alloc's block
 *                                                     AFTER free (deliberate use after free; the
 *                                                     chunk sits in a bin, nothing reuses it);
 *                                                     page 16 is mapped, so 15 faults that belong
 *                                                     to no allocation (class [anon]: brk growth is an anonymous mapping to perf)
 *
 * Inference (faultline analyze): the 8 stackless node_alloc calls have the
 * exact leaf (the return address in node_alloc); the 4 stacked calls at the
 * same leaf have callers from_a 3, from_b 1, so the 8 split 6 / 2, their
 * 8*65 = 520 faults 390 / 130 and their 8*262144 bytes 1572864 / 524288 —
 * which is exactly what from_a and from_b did.
 *
 * Frees: 2 (reuse_old's and uaf_alloc's blocks, in main, each after its
 * blocker). No stdio.
 */
#include <stdlib.h>
#include "fixture.h"

void *volatile fixture_sink;
void *volatile freed_block;

#define SMALL 262144
#define MARK 266240
#define BIG 1048576
#define HEAPBLK 65536

__attribute__((noinline, noclone)) void *big_alloc(void)
{
	char *p = malloc(BIG);
	touch_all(p, BIG);
	keep(p);
	return p;
}

__attribute__((noinline, noclone)) void *node_alloc(size_t n)
{
	char *p = malloc(n);
	touch_all(p, n);
	keep(p);
	return p;
}

__attribute__((noinline, noclone)) void from_a(void)
{
	for (int i = 0; i < 6; i++)
		node_alloc(SMALL);
	for (int i = 0; i < 3; i++)
		node_alloc(MARK);
	keep(NULL); /* no tail call: node_alloc's caller stays from_a */
}

__attribute__((noinline, noclone)) void from_b(void)
{
	node_alloc(SMALL);
	node_alloc(MARK);
	node_alloc(SMALL);
	keep(NULL); /* no tail call */
}

__attribute__((noinline, noclone)) void *reuse_old(void)
{
	char *p = malloc(HEAPBLK);
	((volatile char *)p)[0] = 1;
	keep(p);
	return p;
}

__attribute__((noinline, noclone)) void *reuse_block(void)
{
	char *p = malloc(32);
	keep(p);
	return p;
}

__attribute__((noinline, noclone)) void *reuse_new(void)
{
	char *p = malloc(HEAPBLK);
	touch_all(p, HEAPBLK);
	keep(p);
	return p;
}

__attribute__((noinline, noclone)) void *uaf_alloc(void)
{
	char *p = malloc(HEAPBLK);
	((volatile char *)p)[0] = 1;
	keep(p);
	return p;
}

__attribute__((noinline, noclone)) void *uaf_block(void)
{
	char *p = malloc(32);
	keep(p);
	return p;
}

/* Writes the first byte of every page boundary inside the freed block,
 * never its first 16 bytes (the bin's list pointers live there). */
__attribute__((noinline, noclone)) void uaf_touch(void)
{
	volatile char *v = (volatile char *)freed_block;
	size_t first = PAGE - ((size_t)v & (PAGE - 1));
	for (size_t i = first; i < HEAPBLK; i += PAGE)
		v[i] = 2;
}

int main(void)
{
	/* The blocker goes between the block and the top chunk before the
	 * free, so the freed block stays a chunk of its own in a bin. */
	void *old = reuse_old();
	reuse_block();
	free(old);
	reuse_new();

	/* uaf_touch finds the freed block through a volatile global, where
	 * gcc cannot follow the pointer. */
	freed_block = uaf_alloc();
	uaf_block();
	free(freed_block);
	uaf_touch();

	big_alloc();
	from_a();
	from_b();
	return 0;
}
