/*
 * phases: allocator calls in two phases of one process with a wait
 * between them, for TestRecordLiveOthersEndMidRun (other uprobe recordings
 * of the same libc start and end while this one is recorded, between the
 * phases). N1 × malloc(100) + free, then "ready" on standard output, then
 * it waits for a byte on FIFO, then N2 × malloc(200) + free. No stdio:
 * its buffers would be allocator calls of their own.
 *
 * usage: phases N1 N2 FIFO
 * Allocator calls: N1 mallocs of 100 bytes, N2 of 200, N1 + N2 frees.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* Through a volatile pointer, so that the compiler cannot elide the pair. */
static char *volatile keep;

static void pairs(long n, size_t size)
{
	for (long i = 0; i < n; i++) {
		keep = malloc(size);
		free(keep);
	}
}

int main(int argc, char **argv)
{
	char c;
	int fd;

	if (argc != 4)
		return 2;
	pairs(atol(argv[1]), 100);
	if (write(1, "ready\n", 6) != 6)
		return 1;
	fd = open(argv[3], O_RDONLY);
	if (fd < 0 || read(fd, &c, 1) != 1)
		return 1;
	close(fd);
	pairs(atol(argv[2]), 200);
	return 0;
}
