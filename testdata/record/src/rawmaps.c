/*
 * rawmaps: memory mapped without the C library's mmap wrapper, for
 * TestRecordInprocLiveRawMaps. The in-process recorder sees the wrappers'
 * calls; the kernel's mmap records show these:
 *   - raw_region: syscall(SYS_mmap) of RAW_PAGES pages, each written once
 *     (RAW_PAGES faults), then syscall(SYS_munmap);
 *   - big_block: malloc of BIG bytes, which glibc maps itself (above its
 *     mmap threshold), written whole (BIG / 4096 faults, the chunk's);
 *   - a thread, whose stack glibc maps itself, writing STACK_PAGES pages
 *     of its stack.
 * No stdio: its buffers would be allocator calls of their own.
 *
 * usage: rawmaps
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RAW_PAGES 64
#define BIG (4 << 20)
#define STACK_PAGES 32

__attribute__((noinline)) static void raw_region(void)
{
	long len = RAW_PAGES * 4096L;
	volatile char *p = (volatile char *)syscall(SYS_mmap, 0L, len, (long)(PROT_READ | PROT_WRITE),
						     (long)(MAP_PRIVATE | MAP_ANONYMOUS), -1L, 0L);
	if ((long)p < 0 && (long)p > -4096)
		_exit(2);
	for (long i = 0; i < len; i += 4096)
		p[i] = 1;
	syscall(SYS_munmap, (long)p, len);
}

/* Through a volatile pointer, so that the compiler cannot elide it. */
static char *volatile keep;

__attribute__((noinline)) static void big_block(void)
{
	keep = malloc(BIG);
	if (!keep)
		_exit(2);
	memset(keep, 1, BIG);
	free(keep);
}

__attribute__((noinline)) static void *deep(void *arg)
{
	volatile char frame[STACK_PAGES * 4096];
	for (long i = 0; i < (long)sizeof frame; i += 4096)
		frame[i] = 1;
	return (void *)(long)frame[0] + (long)arg;
}

int main(void)
{
	pthread_t t;
	raw_region();
	big_block();
	if (pthread_create(&t, 0, deep, 0) != 0 || pthread_join(t, 0) != 0)
		return 2;
	return 0;
}
