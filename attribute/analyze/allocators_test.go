package analyze

import (
	"errors"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata/schema"
	"github.com/google/pprof/profile"
)

// allocSite is one allocation site of a testdata/alloc recording.
type allocSite struct {
	allocs         int64
	faults, inside int64 // inside: faults the allocator took serving the calls
	flags          map[string]bool
}

// allocSites sums a ByAlloc profile per site name ("fill_small alloc.c:19",
// "app::Store::fill store.cc:14 (via std::vector::push_back)").
func allocSites(t *testing.T, name string) (map[string]*allocSite, *Result) {
	t.Helper()
	res := analyzeDir(t, "alloc", name, report.ByAlloc)
	return sumSites(res.Profile, func(s *profile.Sample) string { return report.SampleSiteName(s, false) }), res
}

// sumSites sums a ByAlloc profile's samples per site, named by name; the
// samples name returns "" for and the unattributed faults (class label)
// are left out.
func sumSites(p *profile.Profile, name func(*profile.Sample) string) map[string]*allocSite {
	sites := map[string]*allocSite{}
	for _, s := range p.Sample {
		n := ""
		if len(s.Label[report.ClassLabel]) == 0 {
			n = name(s)
		}
		if n == "" {
			continue
		}
		st := sites[n]
		if st == nil {
			st = &allocSite{flags: map[string]bool{}}
			sites[n] = st
		}
		st.faults += s.Value[0]
		st.allocs += s.Value[1]
		if len(s.Label[report.InsideLabel]) > 0 {
			st.inside += s.Value[0]
		}
		for _, f := range s.Label["flag"] {
			st.flags[f] = true
		}
	}
	return sites
}

// TestEveryAllocatorC: testdata/alloc/src/alloc.c recorded with record's
// defaults (no --libc) under static glibc, statically linked jemalloc,
// LD_PRELOADed tcmalloc and DT_NEEDED mimalloc: the allocations of the
// program's two sites are all there, named by its functions and lines.
//
// Expected values: the loop counts in alloc.c (20000 x 512 B at line 19,
// one 8 MiB buffer at line 26 touched on each of its 8 MiB / 4 KiB = 2048
// pages, each fault on the block itself). Whether the buffer is `mmap`
// comes from strace of the same binaries (testdata/alloc/README.md): glibc
// and jemalloc mmap a mapping for it (jemalloc 10 MiB, holding it), tcmalloc
// grows its heap with brk, and mimalloc carves it from the 32 MiB segment
// its first call mapped. No allocator mmaps a mapping for a 512 B block.
// The allocations beyond 20001 are the runtime's own, named in the README.
func TestEveryAllocatorC(t *testing.T) {
	for _, tc := range []struct {
		name      string
		allocs    uint64 // the recording's total
		bigMmap   bool
		extraSite string // a site of the extra allocations, "" for none
	}{
		{"glibc-static", 20006, true, "_dl_init_paths"},
		{"jemalloc-static", 20001, true, ""},
		{"tcmalloc-preload", 20006, false, "libstdc++.so.6.0.30+0xa57b9"},
		{"mimalloc", 20001, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sites, res := allocSites(t, tc.name)
			if got := res.Summary.Tracker.Allocations; got != tc.allocs {
				t.Errorf("%d allocations, want %d", got, tc.allocs)
			}
			small, big := sites["fill_small alloc.c:19"], sites["big_buffer alloc.c:26"]
			if small == nil || big == nil {
				t.Fatalf("sites fill_small alloc.c:19 and big_buffer alloc.c:26 not both in the profile: %v", sites)
			}
			if small.allocs != 20000 || small.flags["mmap"] || small.faults < 2000 {
				t.Errorf("fill_small: %d allocations, %d faults, flags %v; want 20000, >= 2000 (9.8 MiB of 512 B blocks), not mmap", small.allocs, small.faults, small.flags)
			}
			if on := big.faults - big.inside; big.allocs != 1 || on != 2048 || big.flags["mmap"] != tc.bigMmap {
				t.Errorf("big_buffer: %d allocations, %d faults on the block (+%d inside the allocator), flags %v; want 1, 2048, mmap %v", big.allocs, on, big.inside, big.flags, tc.bigMmap)
			}
			if tc.extraSite != "" && sites[tc.extraSite] == nil {
				t.Errorf("no site %s for the runtime's own allocations", tc.extraSite)
			}
			for n := range sites {
				if isAllocatorSite(n) {
					t.Errorf("site %q is named after an allocator function", n)
				}
			}
		})
	}
}

// TestEveryAllocatorCxx: testdata/alloc/src/store.cc under jemalloc (its
// own operator new, DT_NEEDED) and statically linked tcmalloc (operator new
// is tc_new in the program): the container sites are named as under glibc
// (testdata/heapgrow's containers), by the user's line and the library
// function they went through, and none after an allocator function.
// Expected: 20000 strings of 200 bytes (one 201-byte operator new each) at
// store.cc:14, the 8 MiB vector at store.cc:30, whose constructor writes
// every byte: one fault per page the block spans. tcmalloc returns it at a
// page (2048 pages); jemalloc offsets large blocks into their first page
// (opt.cache_oblivious): `perf script -i jemalloc-cxx.data` shows
// op_new__return ptr=0x7f28f3c00e00, so it spans
// (0xe00 + 8 MiB + 4095) / 4096 = 2049 pages.
func TestEveryAllocatorCxx(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pages int64
	}{{"jemalloc-cxx", 2049}, {"tcmalloc-cxx-static", 2048}} {
		name := tc.name
		t.Run(name, func(t *testing.T) {
			sites, _ := allocSites(t, name)
			str := sites["app::Store::fill store.cc:14 (via std::__cxx11::basic_string::basic_string)"]
			vec := sites["app::Store::fill store.cc:14 (via std::vector::push_back)"]
			big := sites["main store.cc:30 (via std::vector::vector)"]
			if str == nil || vec == nil || big == nil {
				t.Fatalf("the string, push_back and vector sites are not all in the profile: %v", sites)
			}
			if str.allocs != 20000 {
				t.Errorf("strings: %d allocations, want 20000", str.allocs)
			}
			// push_back doubles the capacity from 1 to 32768 > 20000.
			if vec.allocs != 16 {
				t.Errorf("push_back: %d allocations, want 16 (capacity 1, 2, 4, ... 32768)", vec.allocs)
			}
			if on := big.faults - big.inside; big.allocs != 1 || on != tc.pages {
				t.Errorf("8 MiB vector: %d allocations, %d faults on it; want 1, %d", big.allocs, on, tc.pages)
			}
			for n := range sites {
				if isAllocatorSite(n) {
					t.Errorf("site %q is named after an allocator function", n)
				}
			}
		})
	}
}

// isAllocatorSite reports whether a site is named after an allocator entry
// point (its leaf function, or the function it went through).
func isAllocatorSite(site string) bool {
	fn, via, _ := strings.Cut(site, " (via ")
	fn, _, _ = strings.Cut(fn, " ")
	via = strings.TrimSuffix(via, ")")
	for _, n := range []string{fn, via} {
		if report.IsAllocator(n) || schema.IsEntrySymbol(n) || strings.HasPrefix(n, "tc_") || strings.HasPrefix(n, "mi_") || strings.HasPrefix(n, "je_") {
			return true
		}
	}
	return false
}

// TestNoAllocationsSaysWhy: a recording with faults on anonymous memory
// and not one allocator call is an error value that says what went wrong,
// naming the --libc the recording probed (what to do is the command's:
// TestAdviceNoAllocations); a program that never allocates (a few loader
// pages) is not.
func TestNoAllocationsSaysWhy(t *testing.T) {
	st := &attribute.Stats{FaultStats: attribute.FaultStats{Faults: 5000}}
	heavy := map[string]uint64{"[anon]": 4744, "[file] libc.so.6": 25}
	err := noAllocations(st, heavy, []string{"faultline", "record", "--libc", "/lib/libc.so.6", "--", "./app"})
	var na *NoAllocationsError
	if !errors.Is(err, ErrNoAllocations) || !strings.Contains(err.Error(), "probed /lib/libc.so.6 (--libc)") || !errors.As(err, &na) || na.Libc != "/lib/libc.so.6" {
		t.Errorf("with --libc: %v", err)
	}
	err = noAllocations(st, heavy, []string{"faultline", "record", "--libc=/x.so", "./app"})
	if err == nil || !strings.Contains(err.Error(), "probed /x.so") {
		t.Errorf("with --libc=: %v", err)
	}
	if err := noAllocations(st, heavy, []string{"perf", "record"}); !errors.Is(err, ErrNoAllocations) || !errors.As(err, &na) || na.Libc != "" || na.Faults != 5000 {
		t.Errorf("without --libc: %v", err)
	}
	if err := noAllocations(st, map[string]uint64{"[anon]": 12, "[heap]": 3, "[file] ld.so": 30}, nil); err != nil {
		t.Errorf("a program that never allocates: %v", err)
	}
	if err := noAllocations(&attribute.Stats{FaultStats: attribute.FaultStats{Faults: 5000}, CallStats: attribute.CallStats{Allocations: 1}}, heavy, nil); err != nil {
		t.Errorf("with an allocation: %v", err)
	}
}
