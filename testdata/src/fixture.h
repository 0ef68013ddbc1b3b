/* Helpers shared by the fixtures. Everything here is static inline so that
 * page-touching loops run inside the calling (allocation-site) function. */
#ifndef FIXTURE_H
#define FIXTURE_H

#include <stddef.h>

#define PAGE 4096

/* keep() makes a pointer escape into a volatile global so gcc can neither
 * delete the malloc nor the stores into the block. */
extern void *volatile fixture_sink;
#define keep(p) (fixture_sink = (p))

/* touch_stride writes one byte at p[0], p[PAGE], p[2*PAGE], ... below n:
 * exactly one write into each of ceil(n/PAGE) consecutive pages counted from
 * the page that holds p. */
static inline __attribute__((always_inline)) void touch_stride(char *p, size_t n)
{
	for (size_t i = 0; i < n; i += PAGE)
		((volatile char *)p)[i] = (char)(i >> 12);
}

/* touch_all writes the first byte at every page boundary inside [p, p+n) and
 * the first and last byte: every page the range overlaps gets one write. */
static inline __attribute__((always_inline)) void touch_all(char *p, size_t n)
{
	volatile char *v = (volatile char *)p;
	v[0] = 1;
	size_t first = PAGE - ((size_t)p & (PAGE - 1));
	for (size_t i = first; i < n; i += PAGE)
		v[i] = 1;
	v[n - 1] = 1;
}

#endif
