/* deep.c — allocations made below 20 KiB of stack frames, for the summary's
 * --stack-size advice (testdata/deepstack/gen.sh). deep() recurses DEPTH
 * times, each frame holding a 4 KiB array, then work() makes COUNT
 * allocations of 5000 bytes: faultline record gives every call of 4096
 * bytes or more a stack sample, and its default 8 KiB copy cannot reach
 * main from there. */
#include <stdlib.h>
#include <string.h>

#define DEPTH 5
#define COUNT 64

static void *keep[COUNT];

__attribute__((noinline)) static void work(void)
{
	for (int i = 0; i < COUNT; i++) {
		keep[i] = malloc(5000);
		if (keep[i] == NULL)
			exit(1);
		memset(keep[i], i, 5000);
	}
}

__attribute__((noinline)) static int deep(int depth)
{
	volatile char pad[4096];
	pad[depth] = (char)depth;
	if (depth == 0)
		work();
	else
		deep(depth - 1);
	return pad[depth];
}

int main(void)
{
	return deep(DEPTH) == DEPTH ? 0 : 1;
}
