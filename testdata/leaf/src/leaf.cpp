// leaf: a small deterministic C++ program whose allocation sites all reach
// malloc through libstdc++ (operator new and its nothrow and aligned
// variants, std::string's out-of-line constructor), the committed fixture
// for analyze's exact leaves of calls recorded without a stack
// (testdata/leaf/README.md). Nothing is freed before exit, so the heap only
// grows and every run takes the same faults at the same sites.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <new>
#include <string>
#include <vector>

// Each site is its own noinline function, so the sites differ in the
// user's code while their leaves inside libstdc++ are shared.

__attribute__((noinline)) static void make_strings(std::vector<std::string> &out, int n)
{
	for (int i = 0; i < n; i++)
		out.emplace_back(100, 'a' + i % 26); // libstdc++ _M_construct -> _M_create -> operator new
}

__attribute__((noinline)) static void more_strings(std::vector<std::string> &out, int n)
{
	for (int i = 0; i < n; i++)
		out.emplace_back(200, 'A' + i % 26); // the same libstdc++ path, another site
}

__attribute__((noinline)) static long list_nodes(std::list<long> &l, int n)
{
	for (int i = 0; i < n; i++)
		l.push_back(i); // operator new(24) inlined from <list>
	return static_cast<long>(l.size());
}

__attribute__((noinline)) static long map_nodes(std::map<int, long> &m, int n)
{
	for (int i = 0; i < n; i++)
		m[i] = i; // operator new from <map>
	return static_cast<long>(m.size());
}

__attribute__((noinline)) static void nothrow_arrays(char **out, int n)
{
	for (int i = 0; i < n; i++) {
		out[i] = new (std::nothrow) char[240]; // operator new[](nothrow) -> operator new[] -> operator new
		memset(out[i], 1, 240);
	}
}

struct alignas(64) Cell {
	char bytes[128];
};

__attribute__((noinline)) static void aligned_cells(Cell **out, int n)
{
	for (int i = 0; i < n; i++) {
		out[i] = new Cell; // operator new(size_t, align_val_t) -> aligned_alloc
		memset(out[i]->bytes, 2, sizeof out[i]->bytes);
	}
}

__attribute__((noinline)) static void c_buffers(char **out, int n)
{
	for (int i = 0; i < n; i++) {
		out[i] = static_cast<char *>(malloc(96)); // straight from the user's code
		memset(out[i], 3, 96);
	}
}

int main()
{
	static char *arrays[500], *bufs[1000];
	static Cell *cells[400];
	std::vector<std::string> a, b;
	a.reserve(3000); // one allocation each (>= 4096: stacked), no growth
	b.reserve(1500);
	std::list<long> l;
	std::map<int, long> m;
	std::vector<char> big(1 << 20, 1); // 1 MiB, mmap'd, touched on every page
	make_strings(a, 3000);
	long sum = list_nodes(l, 4000);
	more_strings(b, 1500);
	sum += map_nodes(m, 2000);
	nothrow_arrays(arrays, 500);
	aligned_cells(cells, 400);
	c_buffers(bufs, 1000);
	printf("%ld\n", sum + static_cast<long>(a.size() + b.size()) + big[4096] + arrays[7][3] + cells[5]->bytes[9] + bufs[3][1]);
	return 0;
}
