// containers: a deterministic C++ program for the recorder's live tests.
// C++ containers (vector, map, string, list), 100000 small mallocs
// (list nodes), an 8 MiB buffer touched on every page (2048 faults with THP
// off) and two threads that allocate too. Every run does exactly the same
// allocations in the same order on each thread.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <string>
#include <thread>
#include <vector>

// Kept out of line so each site has its own return address.
__attribute__((noinline)) static char *big_buffer(size_t n)
{
	char *p = static_cast<char *>(malloc(n));
	for (size_t off = 0; off < n; off += 4096)
		p[off] = 1; // one write per page
	return p;
}

__attribute__((noinline)) static long small_nodes(int n)
{
	std::list<int> l;
	for (int i = 0; i < n; i++)
		l.push_back(i); // one 24-byte malloc per node
	long sum = 0;
	for (int v : l)
		sum += v;
	return sum;
}

__attribute__((noinline)) static long containers()
{
	std::vector<long> v;
	for (int i = 0; i < 200000; i++)
		v.push_back(i); // doubling reallocations
	std::map<int, std::string> m;
	for (int i = 0; i < 5000; i++)
		m[i] = std::string(40, 'a' + i % 26); // node + heap string each
	long sum = 0;
	for (auto &kv : m)
		sum += kv.second.size();
	return sum + static_cast<long>(v.size());
}

__attribute__((noinline)) static void worker(int id, long *out)
{
	std::vector<std::string> strs;
	for (int i = 0; i < 2000; i++)
		strs.emplace_back(64 + id, 'x');
	char *scratch = static_cast<char *>(calloc(256, 1024)); // 256 KiB, mmap'd
	for (size_t off = 0; off < 256 * 1024; off += 4096)
		scratch[off] = 2;
	*out = static_cast<long>(strs.size()) + scratch[4096];
	free(scratch);
}

int main()
{
	char *buf = big_buffer(8 << 20);
	long total = small_nodes(100000);
	total += containers();
	long r1 = 0, r2 = 0;
	std::thread t1(worker, 1, &r1);
	t1.join(); // one after the other: the same order every run
	std::thread t2(worker, 2, &r2);
	t2.join();
	total += r1 + r2 + buf[4096];
	free(buf);
	printf("%ld\n", total);
	return 0;
}
