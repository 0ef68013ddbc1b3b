/*
 * produce: the first program of testdata/pipeline's shell pipeline
 * (sh -c 'produce | consume'). It fills a 256 KiB buffer (glibc mmaps it:
 * above the 128 KiB threshold; 64 pages, each first touched by the memset
 * here) with 4096 lines of 64 bytes and writes it to stdout, then mallocs
 * 100 blocks of 100 bytes. No stdio: its buffer would be another malloc.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINES 4096
#define WIDTH 64

static void *volatile keep;

__attribute__((noinline)) static char *make_lines(void)
{
	char *buf = malloc(LINES * WIDTH);
	if (!buf)
		exit(1);
	memset(buf, 'x', LINES * WIDTH);
	for (int i = 0; i < LINES; i++)
		buf[i * WIDTH + WIDTH - 1] = '\n';
	return buf;
}

__attribute__((noinline)) static void small_blocks(void)
{
	for (int i = 0; i < 100; i++) {
		char *p = malloc(100);
		if (!p)
			exit(1);
		p[0] = (char)i;
		keep = p;
	}
}

int main(void)
{
	char *buf = make_lines();
	for (size_t off = 0; off < LINES * WIDTH;) {
		ssize_t n = write(1, buf + off, LINES * WIDTH - off);
		if (n <= 0)
			return 1;
		off += (size_t)n;
	}
	small_blocks();
	keep = buf;
	return 0;
}
