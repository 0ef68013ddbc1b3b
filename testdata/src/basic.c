/*
 * basic: single-threaded allocation sites with known page-fault counts.
 *
 * Run through launch (THP off, no ASLR). Every allocation site is its own
 * noinline function and page-touching loops are inlined into it, so both the
 * malloc entry stack and the fault IPs name the site. Pointers escape through
 * keep() so gcc keeps every malloc and store. No stdio: stdout's buffer would
 * be one more malloc.
 *
 * Two glibc 2.36 facts decide the counts (x86-64, 4 KiB pages):
 *  - Heap (brk) chunk: malloc writes the chunk's own size field at ptr-8 and
 *    the size field of the remaining top chunk at ptr+size+8 (size a multiple
 *    of 16). A block of k pages that does not start on a page boundary spans
 *    k+1 pages; the first and the last one are already mapped when malloc
 *    returns. Touching every page after return therefore faults k-1 times,
 *    and so does touching one byte per 4 KiB from p[0] (pages 0..k-1).
 *  - mmap'd chunk (size >= 128 KiB mmap threshold, never raised here because
 *    nothing mmap'd is freed): the chunk starts on a page, ptr = page + 16,
 *    and malloc writes the header (at ptr-8) itself, so page 0 faults inside
 *    malloc, at an address just below ptr. A block of n bytes spans
 *    ceil((n+16)/4096) pages, all but the first fault after return.
 *
 * "Faults after return" below are page-faults:u samples whose address lies
 * in [ptr, ptr+size) of that allocation, between its malloc return and the
 * end of the program (no block is freed and reused except in small_objects).
 *
 * Site            call                    size      #  faults after return
 * small_objects   malloc (fastbin size)   24        48  0   (24 per round, 2 rounds, see below)
 * make_table      malloc, stride touch    24576     1   5   (6 pages: k-1)
 * make_buckets    malloc, stride touch    32768     1   7   (8 pages: k-1)
 * make_index      malloc + memset 0x5a    40960     1   9   (10 pages: k-1, faults inside memset)
 * build_tree      malloc via 2 inlined    12288     1   2   (3 pages: k-1; stack has inline
 *                 functions                                     frames node_alloc <- tree_alloc)
 * make_matrix     malloc, mmap'd          1048576   1   256 (257 pages, first one in malloc)
 * make_zeroed     calloc, mmap'd          196608    1   48  (49 pages, first in calloc; calloc
 *                                                            does not memset mmap'd memory;
 *                                                            calloc is not malloc: the malloc
 *                                                            probes do not see it)
 * grow_list       malloc                  8192      1   1   (stride: pages 0,1; page 0 present)
 * grow_list       malloc (blocker)        32        1   0
 * grow_list       realloc 8192 -> 65536   65536     1   13  (moves: the blocker sits behind the
 *                                                            old block. The new block spans 17
 *                                                            pages; _int_malloc wrote pages 0
 *                                                            and 16, realloc's memcpy of 8192
 *                                                            bytes pages 0..2; the stride touch
 *                                                            of pages 0..15 faults 3..15 = 13.
 *                                                            realloc is not malloc: unprobed)
 *
 * small_objects: round 1 mallocs 24 x 24 B (chunk 32, fastbin/tcache size),
 * writes each and frees all (7 go to the tcache, 17 to the fastbin); round 2
 * mallocs 24 x 24 B again and gets the same 24 chunks back (tcache, then the
 * fastbin with tcache stashing). All 24 chunks live in 768 bytes of pages
 * already mapped by earlier malloc bookkeeping writes, so 0 faults.
 */
#include <stdlib.h>
#include <string.h>
#include "fixture.h"

void *volatile fixture_sink;

#define NSMALL 24

__attribute__((noinline, noclone)) void small_objects(void)
{
	char *p[NSMALL];
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < NSMALL; i++) {
			p[i] = malloc(24);
			keep(p[i]);
			memset(p[i], round + 1, 24);
		}
		if (round == 0)
			for (int i = 0; i < NSMALL; i++)
				free(p[i]);
	}
}

__attribute__((noinline, noclone)) char *make_table(void)
{
	char *p = malloc(6 * PAGE);
	keep(p);
	touch_stride(p, 6 * PAGE);
	return p;
}

__attribute__((noinline, noclone)) char *make_buckets(void)
{
	char *p = malloc(8 * PAGE);
	keep(p);
	touch_stride(p, 8 * PAGE);
	return p;
}

__attribute__((noinline, noclone)) char *make_index(void)
{
	char *p = malloc(10 * PAGE);
	keep(p);
	memset(p, 0x5a, 10 * PAGE);	/* not 0: gcc would turn malloc+memset(0) into calloc */
	return p;
}

/* build_tree -> tree_alloc -> node_alloc -> malloc, the two inner ones
 * always inlined: DWARF has DW_TAG_inlined_subroutine for both. */
static inline __attribute__((always_inline)) char *node_alloc(size_t n)
{
	char *p = malloc(n);
	keep(p);
	return p;
}

static inline __attribute__((always_inline)) char *tree_alloc(int pages)
{
	char *p = node_alloc((size_t)pages * PAGE);
	touch_stride(p, (size_t)pages * PAGE);
	return p;
}

__attribute__((noinline, noclone)) char *build_tree(void)
{
	return tree_alloc(3);
}

__attribute__((noinline, noclone)) char *make_matrix(void)
{
	size_t n = 1 << 20;
	char *p = malloc(n);
	keep(p);
	touch_all(p, n);
	return p;
}

__attribute__((noinline, noclone)) char *make_zeroed(void)
{
	size_t n = 48 * PAGE;
	char *p = calloc(1, n);
	keep(p);
	touch_all(p, n);
	return p;
}

__attribute__((noinline, noclone)) char *grow_list(void)
{
	char *p = malloc(2 * PAGE);
	keep(p);
	touch_stride(p, 2 * PAGE);
	char *blocker = malloc(32);	/* stops realloc from growing p in place */
	keep(blocker);
	blocker[0] = 1;
	char *q = realloc(p, 16 * PAGE);
	keep(q);
	touch_stride(q, 16 * PAGE);
	return q;
}

int main(void)
{
	small_objects();
	make_table();
	make_buckets();
	make_index();
	build_tree();
	make_matrix();
	make_zeroed();
	grow_list();
	return 0;
}
