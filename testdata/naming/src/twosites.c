/* twosites.c — two allocation sites for faultline's stripped-binary test
 * (testdata/naming/gen.sh builds it and strips it): a 4 MiB table written
 * once (1024 faults) and 3000 blocks of 1000 bytes (about 750 pages). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static char *table(size_t n)
{
	char *p = malloc(n);
	if (p == NULL)
		exit(1);
	memset(p, 1, n);
	return p;
}

__attribute__((noinline)) static char **blocks(int count, size_t size)
{
	char **v = malloc(count * sizeof *v);
	if (v == NULL)
		exit(1);
	for (int i = 0; i < count; i++) {
		v[i] = malloc(size);
		if (v[i] == NULL)
			exit(1);
		memset(v[i], i, size);
	}
	return v;
}

int main(void)
{
	char *t = table(4 << 20);
	char **b = blocks(3000, 1000);
	printf("%d\n", t[0] + b[2999][0]);
	return 0;
}
