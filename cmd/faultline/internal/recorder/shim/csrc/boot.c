/*
 * boot.c — the arena that serves allocator calls until the allocator the
 * program would have called is found (dlsym may allocate): never freed.
 */
#include "shim.h"

char boot[BOOT_BYTES] __attribute__((aligned(64)));
static size_t boot_used;

void *boot_alloc(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	size_t at = __atomic_load_n(&boot_used, __ATOMIC_RELAXED);
	for (;;) {
		size_t start = (at + align - 1) & ~(align - 1);
		if (start + n > sizeof boot || start + n < start)
			return NULL;
		if (__atomic_compare_exchange_n(&boot_used, &at, start + n, 0,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return boot + start;
	}
}
