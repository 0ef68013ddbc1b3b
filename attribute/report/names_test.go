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
		// Rust v0 manglings (rustc 1.95's std): the qualified path stays,
		// trailing generic arguments go (rustfilt prints the full names).
		{"<alloc::alloc::Global>::alloc_impl", "_RNvMNtCslNYArtu3iFV_5alloc5allocNtB2_6Global10alloc_impl", "<alloc::alloc::Global>::alloc_impl"},
		{"", "_RNvXs_NtCslNYArtu3iFV_5alloc5allocNtB4_6GlobalNtNtCsgEmfK2I1SDS_4core5alloc9Allocator8allocate", "<alloc::alloc::Global as core::alloc::Allocator>::allocate"},
		{"", "_RINvNvNtCsjrHSEGnQ3l9_3std9panicking12catch_unwind7do_callRDINtNtNtCsgEmfK2I1SDS_4core3ops8function2FnuEp6OutputlNtNtB13_6marker4SyncNtNtNtB13_5panic11unwind_safe13RefUnwindSafeEL_lEB6_", "std::panicking::catch_unwind::do_call"},
		// Rust legacy mangling: the demangler's name, hash cut.
		{"", "_ZN5alloc7raw_vec20RawVecInner$LT$A$GT$11finish_grow17hcc5bc77d59b46720E", "alloc::raw_vec::RawVecInner<A>::finish_grow"},
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

// TestRustSite: Rust's standard library (sources under /rustc/<commit>/
// and /rust/deps/, or named alloc::, core::, std::, hashbrown:: where no
// source is known) is the system's: the site is the user's crate, via the
// outermost std function its code called. The frames are those rustc 1.95
// gives Vec::push inlined into m::build (pprof -raw of a real recording).
func TestRustSite(t *testing.T) {
	fn := func(name, file string) *profile.Function { return &profile.Function{Name: name, Filename: file} }
	bin := &profile.Mapping{File: "/tmp/m"}
	std := "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/"
	locs := []*profile.Location{
		{Mapping: bin, Line: []profile.Line{
			{Function: fn("alloc::alloc::realloc", std+"alloc.rs"), Line: 135},
			{Function: fn("<alloc::alloc::Global>::grow_impl", std+"alloc.rs"), Line: 342},
			{Function: fn("alloc::raw_vec::RawVecInner<A>::finish_grow", std+"raw_vec/mod.rs"), Line: 555}}},
		{Mapping: bin, Line: []profile.Line{
			{Function: fn("hashbrown::raw::RawTable::reserve_rehash", "/rust/deps/hashbrown-0.16.1/src/raw/mod.rs"), Line: 1}}},
		{Mapping: bin, Line: []profile.Line{
			{Function: fn("core::ptr::drop_in_place", ""), Line: 0},
			{Function: fn("alloc::vec::Vec<T,A>::push", std+"vec/mod.rs"), Line: 992},
			{Function: fn("m::build", "/src/m.rs"), Line: 9}}},
		{Mapping: bin, Line: []profile.Line{{Function: fn("m::main", "/src/m.rs"), Line: 24}}},
	}
	if got, want := siteName(locs, false), "m::build m.rs:9 (via alloc::vec::Vec<T,A>::push)"; got != want {
		t.Errorf("SiteName = %q, want %q", got, want)
	}
}

// TestAllocatorFrames: an allocator linked into the program is no site.
// A mapping it made while serving a call is charged to that call (the
// frames are jemalloc 5.3's, libjemalloc_pic.a, from pprof -traces of a
// real recording); one it made with no user frame beyond it is the
// allocator's own, named by family, or by module when the family is not
// known (ld.so's minimal malloc).
func TestAllocatorFrames(t *testing.T) {
	fn := func(name string) *profile.Function { return &profile.Function{Name: name, SystemName: name} }
	bin := &profile.Mapping{File: "/tmp/alloc-je-static"}
	ldso := &profile.Mapping{File: "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"}
	libc := &profile.Mapping{File: "/usr/lib/x86_64-linux-gnu/libc.so.6"}
	at := func(m *profile.Mapping, names ...string) []*profile.Location {
		var out []*profile.Location
		for _, n := range names {
			out = append(out, &profile.Location{Mapping: m, Line: []profile.Line{{Function: fn(n)}}})
		}
		return out
	}
	cat := func(ls ...[]*profile.Location) []*profile.Location {
		var out []*profile.Location
		for _, l := range ls {
			out = append(out, l...)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		locs  []*profile.Location
		site  string // siteName, when the stack is not the allocator's own
		owner string // AllocatorOwn's site, "" when it is not the allocator's own
	}{
		{"in malloc", cat(at(libc, "__mmap64"), at(bin, "os_pages_map.constprop.0", "je_pages_map", "base_block_alloc.isra.0", "je_arena_extent_alloc_large", "malloc", "fill_small", "main"), at(libc, "__libc_start_call_main")),
			"fill_small (via malloc)", ""},
		{"at start-up", cat(at(libc, "__mmap64"), at(bin, "os_pages_map.constprop.0", "je_pages_map", "je_tsd_fetch_slow", "malloc_init_hard"), at(libc, "__libc_start_main_impl"), at(bin, "_start")),
			"", "[allocator] jemalloc"},
		{"tcmalloc's start-up", at(bin, "TCMallocGuard::TCMallocGuard"), "", "[allocator] tcmalloc"},
		{"ld.so's malloc", cat(at(libc, "__mmap64"), at(ldso, "__minimal_malloc", "malloc", "_dl_init_paths", "dl_main", "_dl_start", "_start")),
			"", "[allocator] ld-linux-x86-64.so.2"},
		{"no allocator", cat(at(libc, "__mmap64"), at(bin, "map_file", "main")), "map_file (via __mmap64)", ""},
	} {
		if got := siteName(c.locs, false); c.owner == "" && got != c.site {
			t.Errorf("%s: site %q, want %q", c.name, got, c.site)
		}
		if got, own := AllocatorOwn(SiteFrames(c.locs)); got != c.owner || own != (c.owner != "") {
			t.Errorf("%s: AllocatorOwn = %q, %v; want %q", c.name, got, own, c.owner)
		}
	}
}
