package schema

import "strings"

// allocatorInternals names the functions inside each family's allocator
// that a stack can show above its entry points: where the allocator is
// linked into the program (jemalloc's libjemalloc_pic.a, gperftools'
// libtcmalloc_minimal.a, a static glibc) they are not in a system library,
// so nothing else tells them from the program's own code. Prefixes are
// matched against the demangled name with any compiler clone suffix
// (".constprop.0", ".isra.0", ".part.0", ".cold") removed. jemalloc's
// internal functions are named je_ (its JEMALLOC_N mangling) and its
// static ones sit between them, below its entry points; tcmalloc's are in
// namespace tcmalloc and its startup objects; mimalloc's are mi_ and _mi_;
// glibc's are malloc/malloc.c's and malloc/arena.c's.
var allocatorInternals = []struct {
	f        Family
	prefixes []string
	names    []string
}{
	{f: FamilyJemalloc, prefixes: []string{"je_", "jemalloc_", "malloc_init"}},
	{f: FamilyTcmalloc, prefixes: []string{"tcmalloc::", "TCMalloc", "MallocExtension::", "MallocHook", "tc_"}},
	{f: FamilyMimalloc, prefixes: []string{"mi_", "_mi_"}},
	{f: FamilyGlibc, names: []string{
		"_int_malloc", "_int_free", "_int_realloc", "_int_memalign", "sysmalloc", "sysmalloc_mmap",
		"malloc_consolidate", "ptmalloc_init", "tcache_init", "malloc_hook_ini", "arena_get2",
		"_int_new_arena", "new_heap", "alloc_new_heap", "grow_heap", "arena_get_retry",
		"__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign", "__libc_free",
		"_mid_memalign", "__malloc_arena_thread_freeres",
	}},
}

// AllocatorInternal reports whether name is a function inside an
// allocator (allocatorInternals), and whose.
func AllocatorInternal(name string) (Family, bool) {
	if i := strings.IndexByte(name, '.'); i > 0 && !strings.Contains(name, "::") {
		name = name[:i] // a C clone: os_pages_map.constprop.0
	}
	for _, a := range allocatorInternals {
		for _, p := range a.prefixes {
			if strings.HasPrefix(name, p) {
				return a.f, true
			}
		}
		for _, n := range a.names {
			if name == n {
				return a.f, true
			}
		}
	}
	return FamilyOther, false
}
