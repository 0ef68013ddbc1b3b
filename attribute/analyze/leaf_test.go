package analyze

import (
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report"
)

// TestLeafFromTopStack: calls recorded without a stack get their exact
// leaf in the user's code from the entry probe's top stack words, through
// operator new, its nothrow and aligned variants and std::string's
// constructor in libstdc++ — leaves those sites share, so without the top
// words each C++ site would get a proportional share of all their faults.
//
// The reference is the same program recorded with a stack on every call
// (every.data: no inference at all, each call's own stack). Allocation
// counts per site are the loop counts in testdata/leaf/src/leaf.cpp; faults
// per site must equal the reference's within 1 fault or 1% (two runs).
func TestLeafFromTopStack(t *testing.T) {
	def := analyzeDir(t, "leaf", "default", report.ByAlloc)
	ref := analyzeDir(t, "leaf", "every", report.ByAlloc)

	ts := def.Summary.TopStacks
	if ts == nil {
		t.Fatal("default.data: no top-of-stack fields found (recorded by faultline record, they should be there)")
	}
	stackless := uint64(def.Summary.AllocStacks[report.StackInferred].Allocs + def.Summary.AllocStacks[report.StackLeaf].Allocs)
	if ts.Words != 16 || ts.Short != 0 || ts.Library != 0 || ts.User != stackless || stackless < 10000 {
		t.Errorf("top stacks %+v for %d calls without a stack: want 16 words, every call reaching the user's code", *ts, stackless)
	}
	if n := ref.Summary.AllocStacks[report.StackSampled].Allocs; n < 12400 {
		t.Errorf("every.data: %d allocations with their own stack; want all of them (>= 12400)", n)
	}

	sites := func(res *Result) map[string]report.SiteTotals {
		out := map[string]report.SiteTotals{}
		for _, s := range report.TopSites(res.Profile, 1000, false) {
			// "make_strings leaf.cpp:22 (via ...)": the function and line.
			name, _, _ := strings.Cut(s.Name, " (via")
			out[name] = s
		}
		return out
	}
	got, want := sites(def), sites(ref)
	loops := map[string]int64{ // leaf.cpp's loop counts
		"make_strings": 3000, "more_strings": 1500, "list_nodes": 4000, "map_nodes": 2000,
		"nothrow_arrays": 500, "aligned_cells": 400, "c_buffers": 1000,
	}
	seen := map[string]bool{}
	for name, w := range want {
		g := got[name]
		fn, _, _ := strings.Cut(name, " ")
		if n, ok := loops[fn]; ok {
			seen[fn] = true
			if g.Allocs != n || w.Allocs != n {
				t.Errorf("%s: %d allocations (reference %d); leaf.cpp makes %d", name, g.Allocs, w.Allocs, n)
			}
			if w.Faults < 10 {
				t.Errorf("%s: reference has %d faults; the site should fault on fresh heap", name, w.Faults)
			}
		}
		d := g.Faults - w.Faults
		if d < 0 {
			d = -d
		}
		if d > 1 && 100*d > w.Faults {
			t.Errorf("%s: %d faults, %d with a stack on every call", name, g.Faults, w.Faults)
		}
	}
	for fn := range loops {
		if !seen[fn] {
			t.Errorf("no site in %s in every.data", fn)
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok && g.Faults > 0 {
			t.Errorf("%s: %d faults, a site the reference does not have", name, g.Faults)
		}
	}
}
