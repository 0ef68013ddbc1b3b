// C++ fixture for binfile's tests: namespaces, templates, a class method
// and inlined member functions, to check demangling and
// DW_AT_specification chains. Rebuild with ./build.sh.
#include <cstdio>
#include <vector>

namespace fl {
template <typename T> struct Acc {
	T total{};
	inline __attribute__((always_inline)) void add(T v) { total += v * v; }
	__attribute__((noinline)) T sum(const std::vector<T> &xs);
};

template <typename T> T Acc<T>::sum(const std::vector<T> &xs)
{
	for (const T &x : xs)
		add(x);
	return total;
}

template struct Acc<int>;
template struct Acc<double>;

__attribute__((noinline)) int work(int n)
{
	std::vector<int> v;
	for (int i = 0; i < n; i++)
		v.push_back(i);
	Acc<int> a;
	return a.sum(v);
}
} // namespace fl

int main(int argc, char **)
{
	std::vector<double> d{1.5, 2.5};
	fl::Acc<double> a;
	std::printf("%d %f\n", fl::work(argc * 100), a.sum(d));
	return 0;
}
