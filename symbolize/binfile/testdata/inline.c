/* Fixture for binfile's tests: static inline helpers nested three deep so
 * gcc -O2 emits DW_TAG_inlined_subroutine chains, plus out-of-line
 * functions, a weak alias and a function in a second file (inline2.c).
 * Rebuild with ./build.sh; do not edit the binaries by hand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int other_file(int);

static inline __attribute__((always_inline)) int leaf(int x)
{
	if (x & 1)
		return x * 3 + 1;
	return x / 2;
}

static inline __attribute__((always_inline)) int middle(int x)
{
	int s = 0;
	for (int i = 0; i < x % 7; i++)
		s += leaf(x + i);
	return s;
}

static inline __attribute__((always_inline)) int top(int x)
{
	return middle(x) + middle(x + 1) * 2;
}

__attribute__((noinline)) int collatz_sum(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += top(i);
	return s;
}

__attribute__((noinline)) char *dup_twice(const char *s)
{
	size_t n = strlen(s);
	char *p = malloc(2 * n + 1);
	if (!p)
		abort();
	memcpy(p, s, n);
	memcpy(p + n, s, n + 1);
	return p;
}

int real_impl(int x) { return x + top(x); }
int alias_weak(int) __attribute__((weak, alias("real_impl")));

static __attribute__((noinline)) int local_helper(int x)
{
	return other_file(x) ^ middle(x);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	char *p = dup_twice(argc > 2 ? argv[2] : "abc");
	printf("%d %s %d %d\n", collatz_sum(n), p, alias_weak(n), local_helper(n));
	free(p);
	return 0;
}
