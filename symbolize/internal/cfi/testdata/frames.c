// frames.c gives build.sh functions with varied call frame information:
// a frame-pointer frame (alloca), callee-saved register spills, recursion.
#include <alloca.h>
#include <stdio.h>
#include <string.h>

__attribute__((noipa)) long with_alloca(int n) {
	char *p = alloca(n);
	memset(p, 1, n);
	long s = 0;
	for (int i = 0; i < n; i++)
		s += p[i] * i;
	return s;
}

__attribute__((noipa)) long many_regs(long a, long b, long c, long d) {
	long x = a * b, y = b * c, z = c * d, w = d * a;
	long r = with_alloca((int)(a & 63) + 1);
	return r + x * y + z * w + x + y + z + w;
}

__attribute__((noipa)) long fib(long n) {
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv) {
	(void)argv;
	printf("%ld\n", many_regs(argc, 2, 3, 4) + fib(argc + 10));
	return 0;
}
