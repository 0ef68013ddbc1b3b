/* Second compile unit of the inline fixture (see inline.c). */
static inline __attribute__((always_inline)) int twice(int x) { return x * 2 + (x >> 3); }

__attribute__((noinline)) int other_file(int x)
{
	int s = 0;
	for (int i = 0; i < x; i++)
		s ^= twice(i) + i;
	return s;
}
