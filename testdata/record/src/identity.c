/*
 * identity: the binary-identity acceptance program. The live
 * test builds it, records it, then rebuilds it at the same path with
 * -DREBUILT (other functions on other lines) and checks that analyze names
 * the first build's sites from the build-id cache, and none from the
 * rebuilt file without the cache.
 *
 *   cc -g -O1 -ffile-prefix-map=$PWD=/src -o app identity.c
 *   cc -g -O1 -ffile-prefix-map=$PWD=/src -DREBUILT -o app identity.c
 */
#include <stdlib.h>
#include <string.h>

#ifndef REBUILT
__attribute__((noinline)) char *make_table(size_t n)
{
	char *p = malloc(n);
	memset(p, 1, n);
	return p;
}
#define ALLOC make_table
#else
/* Lines shift, names change. */
static int pad(int x) { return x * 3; }

__attribute__((noinline)) char *rebuilt_buffer(size_t n)
{
	char *p = malloc(n);
	memset(p, pad(1), n);
	return p;
}
#define ALLOC rebuilt_buffer
#endif

int main(void)
{
	char *p = ALLOC(8 << 20);
	return p[100] == 1 ? 0 : 1;
}
