/*
 * consume: the second program of testdata/pipeline's shell pipeline
 * (sh -c 'produce | consume'). It reads stdin into a buffer that grows by
 * realloc (64 KiB, doubled while full: produce's 256 KiB need 64, 128, 256
 * and 512 KiB), then counts lines into a 1 MiB table it callocs (mmap'd:
 * the kernel's zero pages, each first touched by the counting loop at a
 * 4 KiB stride: 256 faults). No stdio.
 */
#include <stdlib.h>
#include <unistd.h>

static void *volatile keep;

__attribute__((noinline)) static char *read_all(size_t *len)
{
	size_t cap = 64 << 10, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		exit(1);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				exit(1);
		}
		ssize_t r = read(0, buf + n, cap - n);
		if (r < 0)
			exit(1);
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return buf;
}

__attribute__((noinline)) static long *count_lines(const char *buf, size_t len)
{
	long *table = calloc(1 << 20, 1);
	if (!table)
		exit(1);
	size_t lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += buf[i] == '\n';
	for (size_t i = 0; i < (1 << 20) / sizeof(long); i += 4096 / sizeof(long))
		table[i] = (long)lines;
	return table;
}

int main(void)
{
	size_t len;
	char *buf = read_all(&len);
	keep = count_lines(buf, len);
	keep = buf;
	return len == 4096 * 64 ? 0 : 2;
}
