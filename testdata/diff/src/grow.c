// grow.c — a small program whose page faults grow with its input, recorded
// by testdata/diff/gen.sh on an input and on one three times larger for
// faultline diff's acceptance test (cmd/faultline/internal/cli/diff_recordings_test.go).
//
//   grow FILE    reads FILE, indexes its lines, prints a checksum
//
// Allocation sites (each buffer is > 128 KiB, so glibc mmaps it and every
// page touched is one fault, THP off):
//   load         the file's bytes        grows with the input
//   index_lines  one pointer per line    grows with the input
//   scratch      a fixed 256 KiB area    the same for every input
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCRATCH_SIZE (256 << 10)

static void die(const char *what) {
	perror(what);
	exit(2);
}

// load reads the whole file into one malloc'd buffer.
static __attribute__((noinline)) char *load(const char *path, size_t *len) {
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		die("fstat");
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		die("malloc");
	size_t off = 0;
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);
		if (n <= 0)
			die("read");
		off += (size_t)n;
	}
	close(fd);
	buf[off] = 0;
	*len = off;
	return buf;
}

// index_lines returns a pointer to the start of every line.
static __attribute__((noinline)) char **index_lines(char *buf, size_t len, size_t *nlines) {
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += buf[i] == '\n';
	char **idx = malloc((n + 1) * sizeof *idx);
	if (!idx)
		die("malloc");
	size_t k = 0;
	idx[k++] = buf;
	for (size_t i = 0; i + 1 < len && k <= n; i++)
		if (buf[i] == '\n')
			idx[k++] = buf + i + 1;
	*nlines = k;
	return idx;
}

// scratch is a work area whose size does not depend on the input.
static __attribute__((noinline)) unsigned char *scratch(void) {
	unsigned char *s = malloc(SCRATCH_SIZE);
	if (!s)
		die("malloc");
	memset(s, 0x5a, SCRATCH_SIZE);
	return s;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: grow FILE\n");
		return 2;
	}
	size_t len, n;
	char *buf = load(argv[1], &len);
	char **idx = index_lines(buf, len, &n);
	unsigned char *s = scratch();
	unsigned long sum = 0;
	for (size_t i = 0; i < n; i++)
		sum = sum * 31 + (unsigned char)idx[i][0] + s[i % SCRATCH_SIZE];
	printf("%zu bytes, %zu lines, checksum %lx\n", len, n, sum);
	free(s);
	free(idx);
	free(buf);
	return 0;
}
