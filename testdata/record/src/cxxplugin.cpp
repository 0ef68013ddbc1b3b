/*
 * cxxplugin: a C++ library that dlopener.c loads with dlopen, so that its
 * C++ runtime is not in the program's global scope (the in-process
 * recorder's shim must still find the operator new to stand in for, or
 * to call). gen.sh builds it twice: against the shared libstdc++, and
 * with libstdc++ linked in (-static-libstdc++: its own operator new).
 *
 * plugin_run makes RUNS new char[100] and RUNS new of 24 bytes, and one
 * refused new[] (bad_alloc caught); it returns 0 when all behaved.
 */
#include <new>

#define RUNS 50

struct s24 {
	char b[24];
};

static volatile unsigned long huge = 1ul << 62;

/* Through a volatile pointer, so that the compiler cannot elide the
 * new-expressions (C++14 lets it drop an unused one). */
static void *volatile keep;

extern "C" int plugin_run(void)
{
	int bad = 0;
	for (int i = 0; i < RUNS; i++) {
		char *a = new char[100];
		s24 *b = new s24;
		keep = a;
		keep = b;
		delete[] a;
		delete b;
	}
	try {
		char *c = new char[huge];
		keep = c;
		bad = 1;
		delete[] c;
	} catch (const std::bad_alloc &) {
	}
	return bad;
}
