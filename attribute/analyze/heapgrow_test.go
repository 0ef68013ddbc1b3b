package analyze

import (
	"debug/elf"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
)

var threadLabel = regexp.MustCompile(`^[1-9][0-9]* heapgrow$`)

// analyzeHeapgrow analyzes one recording of testdata/heapgrow (see its
// README) with the committed symfs.
func analyzeHeapgrow(t *testing.T, name string, mode report.Mode) *Result {
	t.Helper()
	r, err := perfdata.Open("../../testdata/heapgrow/"+name+".data", nil)
	if err != nil {
		t.Fatalf("%v (the committed fixture: regenerate with sudo testdata/heapgrow/gen.sh)", err)
	}
	defer r.Close()
	sess, err := symbolize.NewSession(symbolize.Config{Symfs: "../../testdata/heapgrow/symfs", BuildIDDir: "../../testdata/buildid-cache", Getenv: func(string) string { return "" }}, r.Meta())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := Run(r, sess, Options{Attr: attribute.DefaultConfig(), Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Profile.CheckValid(); err != nil {
		t.Fatalf("CheckValid: %v", err)
	}
	return res
}

// TestHeapGrowthChargedToCaller: the faults malloc takes while carving
// small chunks from fresh heap go to the call it served.
//
// Ground truth (testdata/heapgrow/src/heapgrow.c): 100000 x malloc(64) are
// 80-byte chunks, 8,000,000 B = 1953.1 pages of brk heap, each page first
// touched inside malloc (the new top's size word past the chunk), so the
// site many_small has 1953 faults +- 2%, flag fast. big_buffer's 8 MiB is
// mmap'd: header page inside malloc + pages 1..2047 touched after return =
// exactly 2048, flag mmap.
func TestHeapGrowthChargedToCaller(t *testing.T) {
	res := analyzeHeapgrow(t, "heapgrow", report.ByAlloc)
	type site struct {
		faults, allocs int64
		flags          map[string]bool
	}
	sites := map[string]*site{}
	var inside int64
	for _, s := range res.Profile.Sample {
		if len(s.Label["class"]) > 0 || len(s.Location) == 0 || len(s.Location[0].Line) == 0 {
			continue
		}
		ln := s.Location[0].Line
		name := ln[len(ln)-1].Function.Name
		st := sites[name]
		if st == nil {
			st = &site{flags: map[string]bool{}}
			sites[name] = st
		}
		st.faults += s.Value[0]
		st.allocs += s.Value[1]
		for _, f := range s.Label["flag"] {
			st.flags[f] = true
		}
		if len(s.Label[report.InsideLabel]) > 0 {
			inside += s.Value[0]
		}
		// One process, one thread: the thread label is "PID heapgrow"
		// (the name from the COMM record exec wrote).
		if th := s.Label[report.ThreadLabel]; len(th) != 1 || !threadLabel.MatchString(th[0]) {
			t.Errorf("thread label %q", th)
		}
	}
	small, big := sites["many_small"], sites["big_buffer"]
	if small == nil || big == nil {
		t.Fatalf("sites many_small and big_buffer not both in the profile: %v", sites)
	}
	if lo, hi := int64(1953*98/100), int64(1953*102/100); small.faults < lo || small.faults > hi {
		t.Errorf("many_small: %d faults, want 1953 +- 2%% [%d, %d]", small.faults, lo, hi)
	}
	if small.allocs != 100000 || len(small.flags) != 1 || !small.flags["fast"] {
		t.Errorf("many_small: %d allocations, flags %v; want 100000, fast", small.allocs, small.flags)
	}
	if big.faults != 2048 || big.allocs != 1 || len(big.flags) != 1 || !big.flags["mmap"] {
		t.Errorf("big_buffer: %d faults, %d allocations, flags %v; want 2048, 1, mmap", big.faults, big.allocs, big.flags)
	}
	st := res.Summary.Tracker
	if inside != int64(st.InAllocator) || st.InAllocator == 0 {
		t.Errorf("samples labelled %s=allocator hold %d faults, tracker counted %d (want equal, > 0: the first call sets up tcache on fresh heap)", report.InsideLabel, inside, st.InAllocator)
	}
	var sum strings.Builder
	res.Summary.WriteText(&sum)
	if !strings.Contains(sum.String(), "on its own heap or arena memory") {
		t.Errorf("summary does not say how many faults were on the allocator's own memory:\n%s", sum.String())
	}
}

// TestContainersNamedInUserCode: the C++ sites are named by the user's own
// functions, with the library function they went through; profile names
// carry no parameter lists; an allocation's leaf location is its call
// instruction. Independent checks: the committed source's lines (27:
// items.push_back, 34: m[...] =) and the binary's bytes (an x86 `call
// rel32`, opcode 0xe8, ends right after the leaf address).
func TestContainersNamedInUserCode(t *testing.T) {
	res := analyzeHeapgrow(t, "containers", report.ByAlloc)
	src, err := os.ReadFile("../../testdata/heapgrow/src/containers.cpp")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	if !strings.Contains(lines[27-1], "items.push_back(") || !strings.Contains(lines[34-1], "m[i * 7919 % n] =") {
		t.Fatalf("containers.cpp lines 27/34 are not the push_back and map insert the test names")
	}
	var names []string
	for _, s := range res.Summary.TopSites {
		names = append(names, s.Name)
	}
	for _, want := range []string{
		"app::Store::fill containers.cpp:27 (via std::vector::push_back)",
		"app::index_records containers.cpp:34 (via std::map::operator[])",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("summary sites %q lack %q", names, want)
		}
	}
	for _, f := range res.Profile.Function {
		if strings.Contains(f.Name, "(") || strings.Contains(f.Name, "<") {
			t.Errorf("Function.Name %q has a parameter list or template arguments (SystemName %q)", f.Name, f.SystemName)
		}
	}
	ef, err := elf.Open("../../testdata/heapgrow/symfs/tmp/faultline-heapgrow/bin/containers")
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	text := ef.Section(".text")
	code, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, s := range res.Profile.Sample {
		if len(s.Label["class"]) > 0 || len(s.Location) == 0 || s.Location[0].Mapping == nil ||
			!strings.HasSuffix(s.Location[0].Mapping.File, "/containers") {
			continue
		}
		l := s.Location[0]
		vaddr := l.Address - l.Mapping.Start + l.Mapping.Offset // PIE: file offset = vaddr here
		off := vaddr + 1 - 5 - text.Addr
		if vaddr+1 < text.Addr+5 || off >= uint64(len(code)) || code[off] != 0xe8 {
			t.Errorf("leaf %#x (%v): no call rel32 ends at %#x", vaddr, l.Line[len(l.Line)-1].Function.Name, vaddr+1)
		}
		checked++
	}
	if checked == 0 {
		t.Error("no allocation site in the containers binary")
	}
}
