/*
 * faults: takes page faults as fast as the kernel serves them — the ring
 * stress test of the recorder: page faults are recorded without
 * stacks in the same ring as the allocator calls, and cost no uprobe trap,
 * so this program produces range events faster than any allocation-heavy
 * one can. Maps ROUNDS × 64 MiB of anonymous memory in turn, writes one
 * byte per page, unmaps it: ROUNDS × 16384 faults (with THP off).
 *
 * usage: faults [ROUNDS]   (default 64: 1048576 faults)
 */
#include <stdlib.h>
#include <sys/mman.h>

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 64;
	const size_t len = 64 << 20;
	for (int r = 0; r < rounds; r++) {
		char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return 1;
		for (size_t off = 0; off < len; off += 4096)
			p[off] = 1;
		munmap(p, len);
	}
	return 0;
}
