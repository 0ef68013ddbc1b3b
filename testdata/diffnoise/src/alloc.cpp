// alloc.cpp — a deterministic C++ program for faultline diff's noise tests
// (testdata/diffnoise/gen.sh): its allocations go through std::vector,
// std::map and std::string, so each site is named "(via ...)".
// alloc SCALE LOOPS: a vector of SCALE × 2^19 ints grown by push_back, and
// LOOPS × 5000 map entries with string values.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace app {

std::vector<int> fill(int n)
{
	std::vector<int> v;
	for (int i = 0; i < n; i++)
		v.push_back(i);
	return v;
}

std::map<int, std::string> index(int n)
{
	std::map<int, std::string> m;
	for (int i = 0; i < n; i++)
		m[i] = std::string(40, char('a' + i % 26));
	return m;
}

} // namespace app

int main(int argc, char **argv)
{
	int scale = argc > 1 ? std::atoi(argv[1]) : 1;
	int loops = argc > 2 ? std::atoi(argv[2]) : 1;
	std::vector<int> v = app::fill(scale << 19);
	std::map<int, std::string> m = app::index(5000 * loops);
	std::printf("%zu %zu\n", v.size(), m.size());
	return 0;
}
