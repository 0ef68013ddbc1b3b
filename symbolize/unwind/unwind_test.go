package unwind

import (
	"debug/elf"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize/internal/cfi"
)

// symtab is a tiny ELF symbolizer for tests.
type symtab struct {
	syms []elf.Symbol
}

func loadSymtab(t testing.TB, f *elf.File) *symtab {
	t.Helper()
	all, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var s symtab
	for _, x := range all {
		if elf.ST_TYPE(x.Info) == elf.STT_FUNC && x.Value != 0 {
			s.syms = append(s.syms, x)
		}
	}
	sort.Slice(s.syms, func(i, j int) bool { return s.syms[i].Value < s.syms[j].Value })
	return &s
}

func (s *symtab) name(vaddr uint64) string {
	i := sort.Search(len(s.syms), func(i int) bool { return s.syms[i].Value > vaddr }) - 1
	for ; i >= 0; i-- {
		x := s.syms[i]
		if vaddr < x.Value+x.Size || x.Size == 0 && vaddr-x.Value < 0x1000 {
			return x.Name
		}
		if vaddr >= x.Value+x.Size && i < len(s.syms)-1 && x.Value != s.syms[i+1].Value {
			break
		}
	}
	return fmt.Sprintf("?%x", vaddr)
}

// perfFrame is a frame as perf script printed it: the address
// (map-relative, return addresses already minus one) and the file.
type perfFrame struct {
	Addr uint64
	DSO  string
}

// perfScriptStacks reads `perf script --ns --no-inline -F
// comm,pid,tid,time,event,ip,sym,dso`: per sample, the frames perf printed,
// keyed by timeKey. perf prints ffffffffffffffff [unknown] where libdw
// failed; those are dropped.
func perfScriptStacks(t testing.TB, path string) map[string][]perfFrame {
	t.Helper()
	out := map[string][]perfFrame{}
	for _, s := range perftest.ReadScript(t, path) {
		key := fmt.Sprintf("%d %s", s.Tid, s.Time)
		out[key] = nil
		for _, f := range s.Frames {
			if f.Addr != ^uint64(0) {
				out[key] = append(out[key], perfFrame{f.Addr, f.DSO})
			}
		}
	}
	return out
}

func timeKey(tid uint32, ns uint64) string {
	return fmt.Sprintf("%d %d.%09d", tid, ns/1e9, ns%1e9)
}

func TestUnwindStaticFixture(t *testing.T) {
	f, err := elf.Open("testdata/prog")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := cfi.Load(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	syms := loadSymtab(t, f)
	pd, err := readTestPerfData("testdata/prog.data")
	if err != nil {
		t.Fatal(err)
	}
	var maps mappings
	for _, m := range pd.Mmaps {
		if strings.HasSuffix(m.Filename, "/prog") && m.Prot&4 != 0 { // PROT_EXEC
			bias, ok := LoadBias(f, m.Addr, m.Pgoff)
			if !ok {
				t.Fatalf("no bias for %+v", m)
			}
			maps = append(maps, mapping{Start: m.Addr, End: m.Addr + m.Len, Bias: bias, Table: tab})
		}
	}
	if len(maps) != 1 {
		t.Fatalf("want one executable mapping of prog, got %d", len(maps))
	}
	perf := perfScriptStacks(t, "testdata/prog.script")

	u := New(ArchX86_64)
	var frames []Frame
	complete, touches := 0, 0
	want := map[string]bool{}
	for _, s := range pd.Samples {
		regs := RegsFromPerf(ArchX86_64, s.RegsMask, s.Regs)
		sp, _ := regs.SP(ArchX86_64)
		var stop Stop
		frames, stop = u.Unwind(regs, sp, s.Stack, &maps, nil, frames)
		var names []string
		for _, fr := range frames {
			names = append(names, syms.name(fr.lookupPC()-maps[0].Bias))
		}
		chain := strings.Join(names, " <- ")
		t.Logf("tid %d: %s [%v]", s.Tid, chain, stop)
		if stop.Complete() {
			complete++
		}
		// perf script's first frame (the sample IP, as a file offset) must
		// be ours.
		if p, ok := perf[timeKey(s.Tid, s.Time)]; !ok {
			t.Errorf("sample %s not in perf script output", timeKey(s.Tid, s.Time))
		} else if len(p) > 0 {
			off := frames[0].PC - maps[0].Start + 0x1000
			if p[0].Addr != off {
				t.Errorf("sample %s: first frame %x, perf %x", timeKey(s.Tid, s.Time), off, p[0].Addr)
			}
		}
		for i, fr := range frames {
			if names[i] == "__restore_rt" && (fr.Return || i+1 == len(frames) || frames[i+1].Return) {
				t.Errorf("signal trampoline frame %d or the interrupted frame after it is marked as a return address", i)
			}
		}
		if names[0] != "touch" {
			continue
		}
		touches++
		if stop != StopRoot {
			t.Errorf("touch sample did not reach the root: %s [%v]", chain, stop)
		}
		for _, fr := range frames {
			if fr.Kind != FrameCFI && fr.Kind != FrameSample {
				t.Errorf("frame %x found by %v, want CFI", fr.PC, fr.Kind)
			}
		}
		want[chain] = true
	}
	// The stacks prog.c makes (recurse(n) is n+1 frames deep). Where glibc
	// has aliases the symbol table's first name is used: qsort_r for
	// __qsort_r, gsignal for raise, __libc_start_main for its _impl.
	rec := func(n int) string { return strings.Repeat(" <- recurse", n) }
	root := " <- main <- __libc_start_call_main <- __libc_start_main <- _start"
	for _, c := range []string{
		"touch" + rec(11) + root,
		"touch <- cmp" + strings.Repeat(" <- msort_with_tmp.part.0", 4) + " <- qsort_r" + root,
		"touch" + rec(4) + " <- handler <- __restore_rt <- __pthread_kill_implementation.constprop.0 <- gsignal" + root,
		"touch" + rec(6) + " <- thread_main <- start_thread <- clone3",
	} {
		if !want[c] {
			t.Errorf("no sample with stack\n\t%s\ngot:\n\t%s", c, strings.Join(keys(want), "\n\t"))
		}
	}
	t.Logf("%d samples, %d complete stacks, %d in touch", len(pd.Samples), complete, touches)
}

func keys(m map[string]bool) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}
