package report

import (
	"testing"

	"github.com/google/pprof/profile"
)

// TestFunctionName: the names pprof's symbolizer gives in its default mode
// (demangle.NoParams, NoEnclosingParams, NoTemplateParams for mangled
// names; its removeMatching heuristics for demangled ones). The mangled
// names are gcc 12's for testdata/heapgrow/src/containers.cpp (readelf -Ws).
func TestFunctionName(t *testing.T) {
	for _, c := range []struct{ name, system, want string }{
		{"void std::vector<double, std::allocator<double> >::_M_realloc_insert<double>(__gnu_cxx::__normal_iterator<double*, std::vector<double, std::allocator<double> > >, double&&)",
			"_ZNSt6vectorIdSaIdEE17_M_realloc_insertIJdEEEvN9__gnu_cxx17__normal_iteratorIPdS1_EEDpOT_", "std::vector::_M_realloc_insert"},
		{"app::Store<double>::fill(int)", "_ZN3app5StoreIdE4fillEi", "app::Store::fill"},
		{"app::index_records(std::map<int, app::Record>&, int)", "app::index_records(std::map<int, app::Record>&, int)", "app::index_records"},
		{"operator new(unsigned long)", "_Znwm@@GLIBCXX_3.4", "operator new"},
		{"malloc", "malloc", "malloc"},
		{"[file] libc.so.6", "[file] libc.so.6", "[file] libc.so.6"},
	} {
		if got := functionName(c.name, c.system); got != c.want {
			t.Errorf("FunctionName(%q, %q) = %q, want %q", c.name, c.system, got, c.want)
		}
	}
}

// TestSiteName: a site is named by its first frame in the user's code,
// with the library function the code called; raw names the leaf.
func TestSiteName(t *testing.T) {
	fn := func(name, file string) *profile.Function { return &profile.Function{Name: name, Filename: file} }
	bin := &profile.Mapping{File: "/home/u/app"}
	libstd := &profile.Mapping{File: "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30"}
	locs := []*profile.Location{
		{Mapping: bin, Line: []profile.Line{ // out-of-line template, from a system header
			{Function: fn("std::__new_allocator::allocate", "/usr/include/c++/12/bits/new_allocator.h"), Line: 137},
			{Function: fn("std::vector::_M_realloc_insert", "/usr/include/c++/12/bits/vector.tcc"), Line: 453}}},
		{Mapping: bin, Line: []profile.Line{ // push_back inlined into fill
			{Function: fn("std::vector::push_back", "/usr/include/c++/12/bits/stl_vector.h"), Line: 1294},
			{Function: fn("app::Store::fill", "./app.cpp"), Line: 31}}},
		{Mapping: bin, Line: []profile.Line{{Function: fn("main", "./app.cpp"), Line: 40}}},
	}
	if got, want := siteName(locs, false), "app::Store::fill app.cpp:31 (via std::vector::push_back)"; got != want {
		t.Errorf("SiteName = %q, want %q", got, want)
	}
	if got, want := siteName(locs, true), "std::vector::_M_realloc_insert vector.tcc:453"; got != want {
		t.Errorf("raw SiteName = %q, want %q", got, want)
	}
	// A system library frame without lines is skipped by its mapping.
	viaLib := append([]*profile.Location{{Mapping: libstd, Address: 0x1000}}, locs[2])
	libstd.Start, libstd.Offset = 0, 0
	if got, want := siteName(viaLib, false), "main app.cpp:40 (via libstdc++.so.6.0.30+0x1000)"; got != want {
		t.Errorf("SiteName = %q, want %q", got, want)
	}
	// Nothing of the user's: the leaf names the site.
	if got, want := siteName(locs[:1], false), "std::__new_allocator::allocate new_allocator.h:137"; got != want {
		t.Errorf("SiteName = %q, want %q", got, want)
	}
}
