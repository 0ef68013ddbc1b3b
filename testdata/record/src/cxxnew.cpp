/*
 * cxxnew: every path of operator new that the in-process recorder's shim
 * stands in for: new and new[] of 0 and of ordinary sizes, the
 * nothrow forms, a size malloc refuses (bad_alloc caught; NULL from
 * nothrow), and a new-handler that frees a reserve so that the retry
 * succeeds. Each is made NEWS times from main, so that the test can match
 * the calls of both recording methods by size. Exits 0 when every
 * operator behaved as the standard says, 1 otherwise.
 *
 * usage: cxxnew
 * The malloc calls these operators make, by size (N = NEWS):
 *   1 (new[] of 0, new of 0, nothrow new of 0): 3N
 *   40, 48, 56, 64: N each
 *   2^62 (refused): 5N (new[], nothrow new, and new three times: the
 *   new-handler runs twice, the second time removing itself)
 */
#include <cstdio>
#include <cstdlib>
#include <new>

#define NEWS 100

struct s48 {
	char b[48];
};

static volatile size_t huge = (size_t)1 << 62;
static int handled;

static void handler()
{
	/* First call: let operator new try again (the next malloc of the
	 * same huge size fails again); second call: give up. */
	if (handled++ % 2 == 1)
		std::set_new_handler(nullptr);
}

int main()
{
	int bad = 0;
	for (int i = 0; i < NEWS; i++) {
		char *a = new char[0];
		s48 *z = static_cast<s48 *>(::operator new(0));
		char *b = new char[40];
		s48 *c = new s48;
		char *d = new (std::nothrow) char[56];
		void *e = ::operator new(64, std::nothrow);
		void *f = ::operator new(0, std::nothrow);
		if (!a || !z || !b || !c || !d || !e || !f)
			bad = 1;
		b[0] = d[0] = 1;
		try {
			char *g = new char[huge];
			bad = 1;
			delete[] g;
		} catch (const std::bad_alloc &) {
		}
		if (::operator new(huge, std::nothrow) != nullptr)
			bad = 1;
		/* The handler runs twice: malloc is asked three times. */
		std::set_new_handler(handler);
		try {
			void *h = ::operator new(huge);
			bad = 1;
			::operator delete(h);
		} catch (const std::bad_alloc &) {
		}
		delete[] a;
		::operator delete(z);
		delete[] b;
		delete c;
		delete[] d;
		::operator delete(e);
		::operator delete(f);
	}
	if (handled != 2 * NEWS)
		bad = 1;
	if (bad)
		fprintf(stderr, "cxxnew: an operator new misbehaved\n");
	return bad;
}
