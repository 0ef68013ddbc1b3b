package schema

// Family is an allocator implementation: which entry points it has and
// whether its blocks carry glibc's chunk header.
type Family uint8

// The allocator families faultline knows.
const (
	// FamilyOther: a malloc faultline has no table for (a program's own):
	// only the standard C names are probed, and no header is read.
	FamilyOther Family = iota
	FamilyGlibc
	FamilyJemalloc
	FamilyTcmalloc
	FamilyMimalloc
	numFamilies
)

var familyNames = [...]string{"an unknown allocator", "glibc", "jemalloc", "tcmalloc", "mimalloc"}

func (f Family) String() string {
	if f < numFamilies {
		return familyNames[f]
	}
	return "family?"
}

// HasChunkHeader reports whether the word before a block the family
// returns is glibc's chunk header (size | IS_MMAPPED | ...,
// malloc/malloc.c mchunk_size).
func (f Family) HasChunkHeader() bool { return f == FamilyGlibc }

// familyMarks are symbols only one family defines, tried in order: an
// object that defines malloc and one of these is that family's
// (jemalloc: include/jemalloc/jemalloc_protos.h; gperftools:
// gperftools/tcmalloc.h; mimalloc: include/mimalloc.h; glibc:
// malloc/malloc.c's strong aliases).
var familyMarks = []struct {
	sym string
	f   Family
}{
	{"mallocx", FamilyJemalloc}, {"je_mallocx", FamilyJemalloc},
	{"tc_malloc", FamilyTcmalloc},
	{"mi_malloc", FamilyMimalloc},
	{"__libc_malloc", FamilyGlibc},
}

// FamilyOf names the family of an object that defines malloc, from
// whether it defines each family's marks (has reports it).
func FamilyOf(has func(sym string) bool) Family {
	for _, m := range familyMarks {
		if has(m.sym) {
			return m.f
		}
	}
	return FamilyOther
}

// Role of an entry point.
const (
	EntryAlloc = iota // returns a new block
	EntryFree         // releases the block passed as ptr
)

// EntryPoint is an allocator function faultline records: under its
// event name, from the first of its symbols the object defines, with its
// integer arguments named as the analysis reads them (size, nmemb, oldptr,
// alignment, memptr, ptr, flags; the arguments after the last one named
// are not recorded).
type EntryPoint struct {
	Event   string
	Symbols []string
	Args    []string
	Role    int
	Kind    AllocKind // EntryAlloc: what the block is (KindCalloc: zeroed)
	// Status: the return value is a status and the pointer is stored
	// through memptr (posix_memalign).
	Status bool
	// Families that have it; empty: every family.
	Families []Family
}

// For reports whether e belongs to family f.
func (e *EntryPoint) For(f Family) bool {
	if len(e.Families) == 0 {
		return true
	}
	for _, g := range e.Families {
		if g == f {
			return true
		}
	}
	return false
}

var (
	nonGlibc = []Family{FamilyJemalloc, FamilyTcmalloc, FamilyMimalloc}
	je       = []Family{FamilyJemalloc}
	tc       = []Family{FamilyTcmalloc}
	mi       = []Family{FamilyMimalloc}
)

// EntryPoints is the one table of allocator entry points that record
// probes (or the in-process shim names) and analyze and the report read.
// The C names come first; glibc's __libc_ symbols are the functions
// themselves (calloc is probed as __libc_calloc: libc's calloc@plt
// matches "calloc" too). operator new and delete are listed for the
// families that define their own (jemalloc_cpp.cpp, gperftools
// libc_override_gcc_and_weak.h, mimalloc alloc-override.c); libstdc++'s
// call malloc and free, which are recorded instead. Symbols that are
// aliases of one another (tcmalloc's malloc and tc_malloc) share an
// address and are recorded once.
var EntryPoints = []EntryPoint{
	{Event: "malloc", Symbols: []string{"malloc", "__libc_malloc", "je_malloc"}, Args: []string{"size"}, Kind: KindMalloc},
	{Event: "calloc", Symbols: []string{"__libc_calloc", "calloc", "je_calloc"}, Args: []string{"nmemb", "size"}, Kind: KindCalloc},
	{Event: "realloc", Symbols: []string{"realloc", "__libc_realloc", "je_realloc"}, Args: []string{"oldptr", "size"}, Kind: KindRealloc},
	{Event: "reallocarray", Symbols: []string{"reallocarray", "__libc_reallocarray"}, Args: []string{"oldptr", "nmemb", "size"}, Kind: KindReallocArray},
	{Event: "free", Symbols: []string{"free", "__libc_free", "je_free"}, Args: []string{"ptr"}, Role: EntryFree},
	{Event: "memalign", Symbols: []string{"memalign", "__libc_memalign", "je_memalign"}, Args: []string{"alignment", "size"}, Kind: KindMemalign},
	{Event: "aligned_alloc", Symbols: []string{"aligned_alloc", "je_aligned_alloc"}, Args: []string{"alignment", "size"}, Kind: KindMemalign},
	{Event: "posix_memalign", Symbols: []string{"posix_memalign", "__posix_memalign", "je_posix_memalign"}, Args: []string{"memptr", "alignment", "size"}, Kind: KindMemalign, Status: true},
	{Event: "valloc", Symbols: []string{"valloc", "__libc_valloc", "je_valloc"}, Args: []string{"size"}, Kind: KindMemalign},
	{Event: "pvalloc", Symbols: []string{"pvalloc", "__libc_pvalloc"}, Args: []string{"size"}, Kind: KindMemalign},

	// operator new and delete (Itanium C++ ABI manglings, x86-64 size_t).
	{Event: "op_new", Symbols: []string{"_Znwm"}, Args: []string{"size"}, Kind: KindMalloc, Families: nonGlibc},
	{Event: "op_new_array", Symbols: []string{"_Znam"}, Args: []string{"size"}, Kind: KindMalloc, Families: nonGlibc},
	{Event: "op_new_nothrow", Symbols: []string{"_ZnwmRKSt9nothrow_t"}, Args: []string{"size"}, Kind: KindMalloc, Families: nonGlibc},
	{Event: "op_new_array_nothrow", Symbols: []string{"_ZnamRKSt9nothrow_t"}, Args: []string{"size"}, Kind: KindMalloc, Families: nonGlibc},
	{Event: "op_new_aligned", Symbols: []string{"_ZnwmSt11align_val_t"}, Args: []string{"size", "alignment"}, Kind: KindMemalign, Families: nonGlibc},
	{Event: "op_new_array_aligned", Symbols: []string{"_ZnamSt11align_val_t"}, Args: []string{"size", "alignment"}, Kind: KindMemalign, Families: nonGlibc},
	{Event: "op_delete", Symbols: []string{"_ZdlPv"}, Args: []string{"ptr"}, Role: EntryFree, Families: nonGlibc},
	{Event: "op_delete_array", Symbols: []string{"_ZdaPv"}, Args: []string{"ptr"}, Role: EntryFree, Families: nonGlibc},
	{Event: "op_delete_sized", Symbols: []string{"_ZdlPvm"}, Args: []string{"ptr"}, Role: EntryFree, Families: nonGlibc},
	{Event: "op_delete_array_sized", Symbols: []string{"_ZdaPvm"}, Args: []string{"ptr"}, Role: EntryFree, Families: nonGlibc},
	{Event: "op_delete_aligned", Symbols: []string{"_ZdlPvSt11align_val_t"}, Args: []string{"ptr"}, Role: EntryFree, Families: nonGlibc},
	{Event: "op_delete_sized_aligned", Symbols: []string{"_ZdlPvmSt11align_val_t"}, Args: []string{"ptr"}, Role: EntryFree, Families: nonGlibc},
	{Event: "op_new_aligned_nothrow", Symbols: []string{"_ZnwmSt11align_val_tRKSt9nothrow_t"}, Args: []string{"size", "alignment"}, Kind: KindMemalign, Families: nonGlibc},
	{Event: "op_new_array_aligned_nothrow", Symbols: []string{"_ZnamSt11align_val_tRKSt9nothrow_t"}, Args: []string{"size", "alignment"}, Kind: KindMemalign, Families: nonGlibc},
	{Event: "op_delete_nothrow", Symbols: []string{"_ZdlPvRKSt9nothrow_t"}, Args: []string{"ptr"}, Role: EntryFree, Families: nonGlibc},
	{Event: "op_delete_array_nothrow", Symbols: []string{"_ZdaPvRKSt9nothrow_t"}, Args: []string{"ptr"}, Role: EntryFree, Families: nonGlibc},
	{Event: "op_delete_array_aligned", Symbols: []string{"_ZdaPvSt11align_val_t"}, Args: []string{"ptr"}, Role: EntryFree, Families: nonGlibc},
	{Event: "op_delete_array_sized_aligned", Symbols: []string{"_ZdaPvmSt11align_val_t"}, Args: []string{"ptr"}, Role: EntryFree, Families: nonGlibc},

	// jemalloc's non-standard API (jemalloc(3)): flags carry
	// MALLOCX_ZERO and the alignment.
	{Event: "mallocx", Symbols: []string{"mallocx", "je_mallocx"}, Args: []string{"size", "flags"}, Kind: KindMalloc, Families: je},
	{Event: "rallocx", Symbols: []string{"rallocx", "je_rallocx"}, Args: []string{"oldptr", "size", "flags"}, Kind: KindRealloc, Families: je},
	{Event: "sdallocx", Symbols: []string{"sdallocx", "je_sdallocx"}, Args: []string{"ptr"}, Role: EntryFree, Families: je},
	{Event: "dallocx", Symbols: []string{"dallocx", "je_dallocx"}, Args: []string{"ptr"}, Role: EntryFree, Families: je},

	// gperftools' tc_ API (gperftools/tcmalloc.h); most are aliases of
	// the C names and operators above.
	{Event: "tc_malloc", Symbols: []string{"tc_malloc"}, Args: []string{"size"}, Kind: KindMalloc, Families: tc},
	{Event: "tc_calloc", Symbols: []string{"tc_calloc"}, Args: []string{"nmemb", "size"}, Kind: KindCalloc, Families: tc},
	{Event: "tc_realloc", Symbols: []string{"tc_realloc"}, Args: []string{"oldptr", "size"}, Kind: KindRealloc, Families: tc},
	{Event: "tc_free", Symbols: []string{"tc_free"}, Args: []string{"ptr"}, Role: EntryFree, Families: tc},
	{Event: "tc_free_sized", Symbols: []string{"tc_free_sized"}, Args: []string{"ptr"}, Role: EntryFree, Families: tc},
	{Event: "tc_new", Symbols: []string{"tc_new"}, Args: []string{"size"}, Kind: KindMalloc, Families: tc},
	{Event: "tc_newarray", Symbols: []string{"tc_newarray"}, Args: []string{"size"}, Kind: KindMalloc, Families: tc},
	{Event: "tc_delete", Symbols: []string{"tc_delete"}, Args: []string{"ptr"}, Role: EntryFree, Families: tc},
	{Event: "tc_deletearray", Symbols: []string{"tc_deletearray"}, Args: []string{"ptr"}, Role: EntryFree, Families: tc},
	{Event: "tc_memalign", Symbols: []string{"tc_memalign"}, Args: []string{"alignment", "size"}, Kind: KindMemalign, Families: tc},

	// mimalloc's mi_ API (include/mimalloc.h).
	{Event: "mi_malloc", Symbols: []string{"mi_malloc"}, Args: []string{"size"}, Kind: KindMalloc, Families: mi},
	{Event: "mi_zalloc", Symbols: []string{"mi_zalloc"}, Args: []string{"size"}, Kind: KindCalloc, Families: mi},
	{Event: "mi_calloc", Symbols: []string{"mi_calloc"}, Args: []string{"nmemb", "size"}, Kind: KindCalloc, Families: mi},
	{Event: "mi_realloc", Symbols: []string{"mi_realloc"}, Args: []string{"oldptr", "size"}, Kind: KindRealloc, Families: mi},
	{Event: "mi_free", Symbols: []string{"mi_free"}, Args: []string{"ptr"}, Role: EntryFree, Families: mi},
	{Event: "mi_new", Symbols: []string{"mi_new"}, Args: []string{"size"}, Kind: KindMalloc, Families: mi},
	{Event: "mi_malloc_aligned", Symbols: []string{"mi_malloc_aligned"}, Args: []string{"size", "alignment"}, Kind: KindMemalign, Families: mi},
	{Event: "mi_zalloc_aligned", Symbols: []string{"mi_zalloc_aligned"}, Args: []string{"size", "alignment"}, Kind: KindCalloc, Families: mi},
	{Event: "mi_free_size", Symbols: []string{"mi_free_size"}, Args: []string{"ptr"}, Role: EntryFree, Families: mi},
	{Event: "mi_free_aligned", Symbols: []string{"mi_free_aligned"}, Args: []string{"ptr"}, Role: EntryFree, Families: mi},
	{Event: "mi_free_size_aligned", Symbols: []string{"mi_free_size_aligned"}, Args: []string{"ptr"}, Role: EntryFree, Families: mi},
}

var entryBySymbol = func() map[string]*EntryPoint {
	sym := map[string]*EntryPoint{}
	for i := range EntryPoints {
		e := &EntryPoints[i]
		for _, s := range e.Symbols {
			sym[s] = e
		}
	}
	return sym
}()

// IsEntrySymbol reports whether sym (a symbol, not an event name) is one
// of the table's entry points.
func IsEntrySymbol(sym string) bool { return entryBySymbol[sym] != nil }
