/*
 * exectarget: the program forkexec's child execs. One allocation site.
 *
 * Site          call    size   #  faults after return
 * target_alloc  malloc  32768  1  7   (8 pages; the first and last spanned page
 *                                      are mapped by malloc's header writes: k-1)
 */
#include <stdlib.h>
#include "fixture.h"

void *volatile fixture_sink;

__attribute__((noinline, noclone)) char *target_alloc(void)
{
	char *p = malloc(8 * PAGE);
	keep(p);
	touch_stride(p, 8 * PAGE);
	return p;
}

int main(void)
{
	target_alloc();
	return 0;
}
