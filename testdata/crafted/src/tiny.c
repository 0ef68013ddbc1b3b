/* tiny.c — the program behind testdata/crafted's ELF inputs (see gen.sh). */
#include <stdlib.h>

__attribute__((noinline)) static void *grab(size_t n) { return malloc(n); }

int main(int argc, char **argv) {
	(void)argv;
	char *p = grab(4096 * (size_t)argc);
	p[0] = 1;
	free(p);
	return 0;
}
