// containers: C++ allocation sites reached through the standard library
// (a site is named by the user's own function, not by
// std::vector<...>::_M_realloc_insert).
//
// Run through testdata/src/launch.c (THP off, no ASLR).
//
// app::Store<double>::fill pushes 200000 doubles into a std::vector: it
// grows by doubling, 1, 2, 4, ... 262144 elements (19 allocations through
// operator new -> malloc; from 16384 elements, 128 KiB, they are mmap'd).
// index_records inserts 3000 entries into a std::map<int, Record>: one
// node (32-byte header + int key + 48-byte Record = 88 B, a 96-byte chunk)
// per insert, through operator new -> malloc.
#include <map>
#include <vector>

namespace app {

struct Record {
	long a[6];
};

template <typename T> struct Store {
	std::vector<T> items;
	__attribute__((noinline)) void fill(int n)
	{
		for (int i = 0; i < n; i++)
			items.push_back(T(i) * 0.5);
	}
};

__attribute__((noinline)) void index_records(std::map<int, Record> &m, int n)
{
	for (int i = 0; i < n; i++)
		m[i * 7919 % n] = Record{{i, i, i, i, i, i}};
}

} // namespace app

std::map<int, app::Record> *volatile keep_map;
std::vector<double> *volatile keep_vec;

int main()
{
	static app::Store<double> s;
	s.fill(200000);
	keep_vec = &s.items;
	static std::map<int, app::Record> m;
	app::index_records(m, 3000);
	keep_map = &m;
	return 0;
}
