/* phases.c — a program with known memory phases, for faultline's resident
 * memory tests (testdata/mem/gen.sh records it). Each phase touches whole
 * pages, one write per page at the page's first byte of the allocation's
 * own pages, so the pages each site makes resident are known exactly:
 *
 *   1. big64:   malloc(64 MiB), 16384 pages touched, freed (glibc serves it
 *               with its own mmap and frees it with munmap);
 *   2. big32:   malloc(32 MiB), 8192 pages touched, freed;
 *   3. small:   2000 malloc(1000), each written in full, kept;
 *   4. own_map: mmap(16 MiB) of its own, 4096 pages touched page by page,
 *               the first 1024 released with madvise(MADV_DONTNEED) and
 *               touched again (1024 re-faults), then munmap'd; mapped
 *               again (8 MiB) and 2048 pages touched: the kernel gives the
 *               same addresses back, so those are re-faults too.
 *
 * A 100 ms pause separates the phases so that a timeline shows them. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PAGE 4096
#define MIB (1024 * 1024)

static void pause_ms(long ms) {
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Touch npages pages from the page that holds p's first byte's page
 * start + PAGE*i: glibc's mmapped chunk starts 16 bytes into its mapping,
 * so p + i*PAGE lies in the mapping's page i. */
static void __attribute__((noinline)) touch(volatile char *p, long npages) {
	for (long i = 0; i < npages; i++)
		p[i * PAGE] = 1;
}

static void __attribute__((noinline)) big64(void) {
	char *p = malloc(64 * MIB);
	if (!p)
		exit(1);
	touch(p, 64 * MIB / PAGE);
	pause_ms(100);
	free(p);
}

static void __attribute__((noinline)) big32(void) {
	char *p = malloc(32 * MIB);
	if (!p)
		exit(1);
	touch(p, 32 * MIB / PAGE);
	pause_ms(100);
	free(p);
}

static char *keep[2000];

static void __attribute__((noinline)) small(void) {
	for (int i = 0; i < 2000; i++) {
		keep[i] = malloc(1000);
		if (!keep[i])
			exit(1);
		memset(keep[i], 1, 1000);
	}
}

static char *__attribute__((noinline)) own_map(size_t len) {
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		exit(1);
	return p;
}

int main(void) {
	pause_ms(100);
	big64();
	pause_ms(100);
	big32();
	pause_ms(100);
	small();
	pause_ms(100);
	char *m = own_map(16 * MIB);
	touch(m, 16 * MIB / PAGE);
	pause_ms(100);
	madvise(m, 4 * MIB, MADV_DONTNEED);
	touch(m, 4 * MIB / PAGE);
	pause_ms(100);
	munmap(m, 16 * MIB);
	char *m2 = own_map(8 * MIB);
	touch(m2, 8 * MIB / PAGE);
	pause_ms(100);
	printf("%p %p %d\n", (void *)m, (void *)m2, keep[1999][999]);
	return 0;
}
