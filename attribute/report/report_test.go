package report_test

import (
	"slices"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/google/pprof/profile"
)

var libc = &report.Mapping{File: "/usr/lib/x86_64-linux-gnu/libc.so.6", BuildID: "93ac61ec", Start: 0x7f0000000000, Limit: 0x7f0000200000}
var prog = &report.Mapping{File: "/bin/prog", BuildID: "abcd", Start: 0x400000, Limit: 0x500000}

type fakeStacks map[attribute.StackID][]report.Location

func (f fakeStacks) Stack(id attribute.StackID) []report.Location { return f[id] }

func loc(m *report.Mapping, addr uint64, fns ...string) report.Location {
	l := report.Location{Addr: addr, Mapping: m}
	for _, f := range fns {
		l.Lines = append(l.Lines, report.Line{Function: f, SystemName: f, File: "x.c", Line: 7})
	}
	return l
}

var stacks = fakeStacks{
	// allocation stack: malloc, then the caller grow (with inlined helper), then main
	1: {loc(libc, 0x7f0000001000, "malloc"), loc(prog, 0x401010, "helper", "grow"), loc(prog, 0x401100, "main")},
	// faulting code: memset in libc called from grow
	2: {loc(libc, 0x7f0000002000, "__memset_avx2_unaligned_erms"), loc(prog, 0x401020, "grow"), loc(prog, 0x401100, "main")},
}

func run(t *testing.T, mode report.Mode) *profile.Profile {
	t.Helper()
	b := report.NewBuilder(mode, func(uint32) string { return "prog" })
	tr := attribute.NewTracker(attribute.DefaultConfig(), b, nil)
	tr.Entry(&attribute.Entry{Pid: 1, Tid: 1, Time: 1, Size: 3 * 4096, Stack: 1})
	tr.Return(&attribute.Return{Pid: 1, Tid: 1, Time: 2, Ptr: 0x600010})
	for i := uint64(0); i < 3; i++ {
		tr.Fault(&attribute.Fault{Pid: 1, Tid: 1, Time: 3 + i, Addr: 0x600010 + i*4096, Stack: 2, InMemset: true, Access: attribute.AccessWrite})
	}
	tr.Fault(&attribute.Fault{Pid: 1, Tid: 1, Time: 9, Addr: 0x9000000, Stack: 2})
	tr.Close()
	// write-then-read round trip
	return reporttest.RoundTrip(t, b.Profile(stacks))
}

func TestByAlloc(t *testing.T) {
	p := run(t, report.ByAlloc)
	var attributed, unattributed int64
	for _, s := range p.Sample {
		if len(s.Label["class"]) > 0 {
			unattributed += s.Value[0]
			if got := s.Location[0].Line[0].Function.Name; got != "[unknown]" {
				t.Errorf("class leaf = %q", got)
			}
			continue
		}
		attributed += s.Value[0]
		// allocator frame dropped: the leaf is the caller, with its inline chain
		if got := s.Location[0].Line[0].Function.Name; got != "helper" {
			t.Errorf("leaf = %q, want helper (malloc dropped)", got)
		}
		if got := s.Label["flag"]; len(got) != 1 || got[0] != "zero" {
			t.Errorf("flags = %v, want [zero]", got)
		}
		if s.Value[0] == 3 && s.Label["access"][0] != "write" {
			t.Errorf("access = %v", s.Label["access"])
		}
	}
	if attributed != 3 || unattributed != 1 {
		t.Errorf("attributed %d unattributed %d, want 3 and 1", attributed, unattributed)
	}
	// Raw: the leaf's physical function; else the first user frame, the
	// inlined helper ("x.c" is the user's source).
	top := report.TopSites(p, 10, true)
	if len(top) != 1 || top[0].Faults != 3 || top[0].Allocs != 1 || top[0].Size != 3*4096 || top[0].Name != "grow x.c:7" {
		t.Errorf("raw top = %+v", top)
	}
	if top := report.TopSites(p, 10, false); len(top) != 1 || top[0].Name != "helper x.c:7" {
		t.Errorf("top = %+v", top)
	}
}

func TestByTouch(t *testing.T) {
	p := run(t, report.ByTouch)
	found := false
	for _, s := range p.Sample {
		if s.Value[0] == 3 {
			found = true
			if got := s.Location[0].Line[0].Function.Name; got != "__memset_avx2_unaligned_erms" {
				t.Errorf("touch leaf = %q", got)
			}
			// the first user frame: the inlined helper
			if got := s.Label["alloc_site"]; len(got) != 1 || got[0] != "helper x.c:7" {
				t.Errorf("alloc_site = %v", got)
			}
		}
	}
	if !found {
		t.Error("no sample with the 3 attributed faults")
	}
}

// TestSiteLeaf: by default an allocation's leaf in the profile is its site
// frame (the first frame in the user's code), with the library function it
// went through as the via label, so pprof's flat column shows the site;
// RawSites keeps the raw leaf and no label. The summary names the site
// alike from both. The frames are made up the way libstdc++ inlines
// std::vector::push_back into a caller, and as an out-of-line libstdc++.so
// function.
func TestSiteLeaf(t *testing.T) {
	libstd := &report.Mapping{File: "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", Start: 0x7f0000400000, Limit: 0x7f0000600000}
	ln := func(fn, file string, line int64) report.Line {
		return report.Line{Function: fn, SystemName: fn, File: file, Line: line}
	}
	stacks := fakeStacks{
		1: {loc(libc, 0x7f0000001000, "malloc"),
			{Addr: 0x401010, Mapping: prog, Lines: []report.Line{
				ln("std::__new_allocator::allocate", "/usr/include/c++/12/bits/new_allocator.h", 137),
				ln("std::vector::push_back", "/usr/include/c++/12/bits/stl_vector.h", 1294),
				ln("fill", "/src/app.cpp", 31)}},
			{Addr: 0x401100, Mapping: prog, Lines: []report.Line{ln("main", "/src/app.cpp", 40)}}},
		2: {loc(libc, 0x7f0000001000, "malloc"),
			{Addr: 0x7f0000401000, Mapping: libstd},
			{Addr: 0x401200, Mapping: prog, Lines: []report.Line{ln("main", "/src/app.cpp", 44)}}},
	}
	for _, raw := range []bool{false, true} {
		b := report.NewBuilder(report.ByAlloc, nil)
		b.RawSites = raw
		tr := attribute.NewTracker(attribute.DefaultConfig(), b, nil)
		tr.Entry(&attribute.Entry{Pid: 1, Tid: 1, Time: 1, Size: 64, Stack: 1})
		tr.Return(&attribute.Return{Pid: 1, Tid: 1, Time: 2, Ptr: 0x600010})
		tr.Entry(&attribute.Entry{Pid: 1, Tid: 1, Time: 3, Size: 64, Stack: 2})
		tr.Return(&attribute.Return{Pid: 1, Tid: 1, Time: 4, Ptr: 0x700010})
		tr.Close()
		p := reporttest.RoundTrip(t, b.Profile(stacks))
		if len(p.Sample) != 2 {
			t.Fatalf("raw %v: %d samples, want 2", raw, len(p.Sample))
		}
		type want struct {
			leaf  string // the leaf location's innermost line
			lines int    // its lines
			via   []string
			depth int
		}
		wants := []want{{"fill", 1, []string{"std::vector::push_back"}, 2}, {"main", 1, []string{"libstdc++.so.6.0.30+0x1000"}, 1}}
		if raw {
			// An unsymbolized location is a function of its own, named
			// by module and file offset.
			wants = []want{{"std::__new_allocator::allocate", 3, nil, 2}, {"libstdc++.so.6.0.30+0x1000", 1, nil, 2}}
		}
		for i, s := range p.Sample {
			w := wants[i]
			leaf := ""
			if l := s.Location[0].Line; len(l) > 0 {
				leaf = l[0].Function.Name
			}
			if leaf != w.leaf || len(s.Location[0].Line) != w.lines || len(s.Location) != w.depth || !slices.Equal(s.Label[report.ViaLabel], w.via) {
				t.Errorf("raw %v, sample %d: leaf %q with %d lines, %d locations, via %q; want %q, %d, %d, %q",
					raw, i, leaf, len(s.Location[0].Line), len(s.Location), s.Label[report.ViaLabel], w.leaf, w.lines, w.depth, w.via)
			}
		}
		if got := report.TopSites(p, 10, false); len(got) != 2 || got[0].Name != "fill app.cpp:31 (via std::vector::push_back)" || got[1].Name != "main app.cpp:44 (via libstdc++.so.6.0.30+0x1000)" {
			t.Errorf("raw %v: sites %+v", raw, got)
		}
	}
}
