package analyze

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/google/pprof/profile"
)

// The testdata/mixed recordings have faultline record's shape (issue 10):
// range events without stacks (malloc entry and return, free, page faults)
// and the malloc entry opened again with DWARF stacks, filtered to
// size >= 1 MiB and size == 266240. testdata/src/mixed.c explains the
// expected numbers; testdata/check_mixed.py computed the same numbers from
// perf script's text of each recording (perf's decoder and unwinder) into
// testdata/mixed/VARIANT.expect.tsv.
var mixedVariants = []string{"range-first", "stack-first"}

const mixedDir = "../../testdata/mixed"

func analyzeMixed(t *testing.T, variant string, events map[string]string) *Result {
	t.Helper()
	return analyzePath(t, filepath.Join(mixedDir, variant+".data"), fixtureFiles, Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc, Events: events})
}

// mixedRow is one (leaf, caller, stack kind) total, as check_mixed.py
// prints it.
type mixedRow = totals

func outermost(l *profile.Location) string {
	if len(l.Line) == 0 {
		return "[unknown]"
	}
	return l.Line[len(l.Line)-1].Function.Name
}

// mixedSites groups the profile's allocation samples in the fixture
// binary by leaf function, caller ("-" when the stack is the leaf alone)
// and stack label.
func mixedSites(p *profile.Profile) map[string]mixedRow {
	return groupSites(p, func(s *profile.Sample) (string, bool) {
		leaf := s.Location[0]
		if leaf.Mapping == nil || !strings.HasPrefix(leaf.Mapping.File, fixtureDir) {
			return "", false // libc's own allocations (none here) or the loader's
		}
		caller := "-"
		if len(s.Location) > 1 {
			caller = outermost(s.Location[1])
		}
		return outermost(leaf) + "\t" + caller + "\t" + strings.Join(s.Label[report.StackLabel], ","), true
	})
}

func loadMixedExpect(t *testing.T, variant string) (map[string]mixedRow, map[string]int64) {
	t.Helper()
	f, err := os.Open(filepath.Join(mixedDir, variant+".expect.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, unattr := map[string]mixedRow{}, map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		fs := strings.Split(sc.Text(), "\t")
		num := func(s string) int64 {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("%s.expect.tsv: %q: %v", variant, sc.Text(), err)
			}
			return n
		}
		switch {
		case len(fs) == 3 && fs[0] == "unattributed":
			unattr[fs[1]] = num(fs[2])
		case len(fs) == 6:
			rows[strings.Join(fs[:3], "\t")] = mixedRow{allocs: num(fs[3]), faults: num(fs[4]), bytes: num(fs[5])}
		default:
			t.Fatalf("%s.expect.tsv: bad line %q", variant, sc.Text())
		}
	}
	return rows, unattr
}

// The arithmetic of testdata/src/mixed.c's header: mmap'd blocks fault on
// every page they span, ceil((n+16)/4096); the 64 KiB heap block handed
// back after its free faults on its 15 untouched middle pages; the 8
// stackless node_alloc calls (6 from from_a, 2 from from_b, 65 faults and
// 262144 bytes each) split 3:1 like the 4 stacked ones. Issue 11: a 64 KiB
// heap block's 17th page is faulted inside malloc by the new top's header
// at ptr+chunksize-8, which is the block's own (reuse_old, uaf_alloc: 1
// each); reuse_old's malloc is the program's first brk-heap use, and the
// heap's first page (sysmalloc's top header) is charged to it too (2).
var mixedArithmetic = map[string]mixedRow{
	"big_alloc\tmain\tsampled":     {allocs: 1, faults: 257, bytes: 1 << 20},
	"node_alloc\tfrom_a\tsampled":  {allocs: 3, faults: 3 * 66, bytes: 3 * 266240},
	"node_alloc\tfrom_b\tsampled":  {allocs: 1, faults: 66, bytes: 266240},
	"node_alloc\tfrom_a\tinferred": {allocs: 6, faults: 6 * 65, bytes: 6 * 262144},
	"node_alloc\tfrom_b\tinferred": {allocs: 2, faults: 2 * 65, bytes: 2 * 262144},
	"reuse_old\t-\tleaf":           {allocs: 1, faults: 2, bytes: 65536},
	"reuse_block\t-\tleaf":         {allocs: 1, faults: 0, bytes: 32},
	"reuse_new\t-\tleaf":           {allocs: 1, faults: 15, bytes: 65536},
	"uaf_alloc\t-\tleaf":           {allocs: 1, faults: 1, bytes: 65536},
	"uaf_block\t-\tleaf":           {allocs: 1, faults: 0, bytes: 32},
}

func TestMixedFixture(t *testing.T) {
	for _, v := range mixedVariants {
		t.Run(v, func(t *testing.T) {
			res := analyzeMixed(t, v, nil)
			got := mixedSites(res.Profile)
			script, _ := loadMixedExpect(t, v)
			for _, k := range unionKeys(strings.Compare, got, mixedArithmetic, script) {
				if got[k] != mixedArithmetic[k] || got[k] != script[k] {
					t.Errorf("%q: analyze %+v, arithmetic %+v, check_mixed.py %+v", k, got[k], mixedArithmetic[k], script[k])
				}
			}
			st := res.Summary.Tracker
			// 23 malloc samples: 18 range entries and 5 stack samples
			// (1 of size >= 1 MiB, 4 of 266240). Stacks never make calls.
			if st.Entries != 18 || st.Returns != 18 || st.Allocations != 18 || st.UnpairedEntries+st.UnpairedReturns != 0 {
				t.Errorf("entries %d returns %d allocations %d unpaired %d+%d, want 18 18 18 0",
					st.Entries, st.Returns, st.Allocations, st.UnpairedEntries, st.UnpairedReturns)
			}
			if j := res.Summary.StackJoin; j == nil || *j != (StackJoin{Joined: 5, Bare: 13}) {
				t.Errorf("stack join %+v, want 5 joined, 0 unmatched, 13 bare", j)
			}
			var stackSamples uint64
			for _, e := range res.Summary.Events {
				if e.Role == RoleStack.String() {
					stackSamples += e.Samples
				}
			}
			if stackSamples != 5 {
				t.Errorf("stack event samples %d, want 5 (events %+v)", stackSamples, res.Summary.Events)
			}
			// 8 of 18 allocations inferred, 5 sampled, 5 leaf only.
			as := res.Summary.AllocStacks
			if as[report.StackInferred].Allocs != 8 || as[report.StackSampled].Allocs != 5 || as[report.StackLeaf].Allocs != 5 {
				t.Errorf("allocation stacks %+v, want inferred 8, sampled 5, leaf 5", as)
			}
		})
	}
}

// TestMixedOrder: the two recordings really differ in which half of a
// probe hit comes first (the test above then covers both joins).
func TestMixedOrder(t *testing.T) {
	for _, v := range mixedVariants {
		r, err := perfdata.Open(filepath.Join(mixedDir, v+".data"), nil)
		if err != nil {
			t.Fatal(err)
		}
		first := ""
		for r.Next() && first == "" {
			smp, ok := r.Record().(*perfdata.Sample)
			if !ok || smp.Event == nil || smp.Event.Format == nil || smp.Event.Format.Name != "malloc" {
				continue
			}
			size, _ := smp.Event.Format.Field("size").Uint64(smp.Raw)
			if size != 266240 {
				continue
			}
			first = "range-first"
			if hasStacks(smp.Event) {
				first = "stack-first"
			}
		}
		r.Close()
		if first != v {
			t.Errorf("%s.data: first half of a 266240-byte malloc hit is %s", v, first)
		}
	}
}

// TestMixedFree: the free probe ends allocations. Ignoring it (as a
// recording without free would) leaves uaf_alloc's freed block live, and
// the 15 faults uaf_touch takes in it after the free move from "no
// allocation" to uaf_alloc; reuse_new keeps its 15 either way (the reused
// chunk replaces the freed one), and nothing else changes.
func TestMixedFree(t *testing.T) {
	for _, v := range mixedVariants {
		t.Run(v, func(t *testing.T) {
			_, unattr := loadMixedExpect(t, v)
			if unattr["freed"] != 15 {
				t.Fatalf("check_mixed.py: faults in freed memory = %d, want 15 (mixed.c)", unattr["freed"])
			}
			with := analyzeMixed(t, v, nil)
			without := analyzeMixed(t, v, map[string]string{"fl_mixed:free": "ignore"})
			a, b := mixedSites(with.Profile), mixedSites(without.Profile)
			uaf := "uaf_alloc\t-\tleaf"
			if b[uaf].faults-a[uaf].faults != 15 {
				t.Errorf("uaf_alloc faults with free %d, without %d: want 15 more without", a[uaf].faults, b[uaf].faults)
			}
			ws, wo := with.Summary.Tracker, without.Summary.Tracker
			if wo.Faults-wo.Attributed-(ws.Faults-ws.Attributed) != ^uint64(15)+1 {
				t.Errorf("unattributed with free %d, without %d: want 15 fewer without", ws.Faults-ws.Attributed, wo.Faults-wo.Attributed)
			}
			for k, r := range a {
				if k != uaf && b[k] != r {
					t.Errorf("%q: with free %+v, without %+v", k, r, b[k])
				}
			}
			if ws.Frees != 2 || ws.UnknownFrees != 0 {
				t.Errorf("frees %d unknown %d, want 2 0", ws.Frees, ws.UnknownFrees)
			}
		})
	}
}

// TestLossAgreesWithPerfStats: per event, lost = the LOST_SAMPLES count
// `perf report --stats` prints for it (testdata/mixed/lossy.stats.txt);
// the LOST records' total (lossy.lost.txt, summed from perf script -D) is
// reported apart, never added to an event; the profile carries every
// event's counts as comments.
func TestLossAgreesWithPerfStats(t *testing.T) {
	stats, err := os.ReadFile(filepath.Join(mixedDir, "lossy.stats.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{}
	ev := ""
	for _, line := range strings.Split(string(stats), "\n") {
		if name, ok := strings.CutSuffix(line, " stats:"); ok && name != "Aggregated" {
			ev = name
			continue
		}
		if f := strings.Fields(line); ev != "" && len(f) >= 3 && f[0] == "LOST_SAMPLES" && f[1] == "events:" {
			n, _ := strconv.ParseUint(f[2], 10, 64)
			want[ev] = n
		}
	}
	lostTxt, err := os.ReadFile(filepath.Join(mixedDir, "lossy.lost.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var records, lostBuffer uint64
	if _, err := fmt.Sscanf(string(lostTxt), "LOST\t%d records\t%d lost", &records, &lostBuffer); err != nil || lostBuffer == 0 {
		t.Fatalf("lossy.lost.txt %q: %v", lostTxt, err)
	}
	res := analyzeMixed(t, "lossy", nil)
	if len(want) != 3 {
		t.Fatalf("lossy.stats.txt: per-event LOST_SAMPLES for %d events, want 3:\n%s", len(want), stats)
	}
	var total uint64
	for _, e := range res.Summary.Events {
		if e.Lost != want[e.Name] {
			t.Errorf("%s: lost %d, perf report --stats says %d", e.Name, e.Lost, want[e.Name])
		}
		total += e.Lost
	}
	if res.Summary.LostTotal != total || res.Summary.LostBuffer != lostBuffer {
		t.Errorf("lost total %d (events sum %d), LOST records %d (perf script -D: %d)", res.Summary.LostTotal, total, res.Summary.LostBuffer, lostBuffer)
	}
	losses := report.RecordingLosses(res.Profile.Comments)
	if len(losses) != len(res.Summary.Events) {
		t.Fatalf("profile comments %q: want one loss line per event (%d)", res.Profile.Comments, len(res.Summary.Events))
	}
	for i, l := range losses {
		if e := res.Summary.Events[i]; l.Name != e.Name || l.Role != e.Role || l.Samples != e.Samples || l.Lost != e.Lost {
			t.Errorf("comment %d: %+v, event %+v", i, l, e)
		}
	}
}
