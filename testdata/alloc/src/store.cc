// store.cc — a C++ program whose allocations are made through containers.
// app::Store::fill grows a std::vector of 20000 std::strings of 200 bytes
// (each string's buffer is one operator new of 201 bytes, the vector's
// growth a few more); main's std::vector<char> is one 8 MiB operator new.
#include <string>
#include <vector>

namespace app {
struct Store {
	std::vector<std::string> rows;
	__attribute__((noinline)) void fill(int n)
	{
		for (int i = 0; i < n; i++)
			rows.push_back(std::string(200, 'x'));
	}
	__attribute__((noinline)) long touch() const
	{
		long s = 0;
		for (const auto &r : rows)
			s += r[0];
		return s;
	}
};
} // namespace app

int main()
{
	app::Store s;
	s.fill(20000);
	std::vector<char> big(8 << 20, 1);
	return s.touch() + big[4096] > 0 ? 0 : 1;
}
