package analyze

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
)

const fixtureDir = "/tmp/faultline-fixtures/bin/"

// expectRow is one row of testdata/expect/expect.tsv: counts derived by
// arithmetic from the fixture programs' source and glibc's rules (see
// testdata/README.md), and checked against perf's own decoding of every
// recording by testdata/check_expect.py.
type expectRow struct {
	prog, comm, site, call string
	size, count            int64
	inBlock, faults        int64
	flags                  map[string]bool
}

func loadExpect(t *testing.T) []expectRow {
	data := perftest.ReadTestdata(t, "expect", "expect.tsv")
	var rows []expectRow
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 11 || strings.HasPrefix(f[0], "#") || f[0] == "prog" {
			continue
		}
		num := func(s string) int64 {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("expect.tsv: %q: %v", s, err)
			}
			return n
		}
		r := expectRow{prog: f[0], comm: f[1], site: f[3], call: f[4], size: num(f[5]), count: num(f[6]),
			inBlock: num(f[8]), faults: num(f[9]), flags: map[string]bool{}}
		for _, fl := range strings.Split(f[10], ",") {
			r.flags[fl] = true
		}
		rows = append(rows, r)
	}
	return rows
}

// siteKey is how the test groups the profile: process name, the function
// that called the allocator (outermost line of the leaf location: inlined
// helpers fold into it) and the flag labels.
type siteKey struct{ comm, site, flags string }

type siteVal = totals

// totals is what a profile holds for a site: faults, allocations, bytes.
type totals struct{ faults, allocs, bytes int64 }

// unionKeys returns the keys of all the maps, sorted by cmp.
func unionKeys[K comparable, V any](cmp func(a, b K) int, ms ...map[K]V) []K {
	keys := map[K]bool{}
	for _, m := range ms {
		for k := range m {
			keys[k] = true
		}
	}
	return slices.SortedFunc(maps.Keys(keys), cmp)
}

// groupSites sums the allocation samples of a by-alloc profile (not the
// unattributed classes) by key; key's false leaves a sample out.
func groupSites[K comparable](p *profile.Profile, key func(s *profile.Sample) (K, bool)) map[K]totals {
	out := map[K]totals{}
	for _, s := range p.Sample {
		if len(s.Label[report.ClassLabel]) > 0 || len(s.Location) == 0 {
			continue
		}
		k, ok := key(s)
		if !ok {
			continue
		}
		v := out[k]
		v.faults += s.Value[0]
		v.allocs += s.Value[1]
		v.bytes += s.Value[2]
		out[k] = v
	}
	return out
}

// fixtureFiles finds the fixtures' binaries in testdata alone.
var fixtureFiles = symbolize.Config{Symfs: "../../testdata/symfs", BuildIDDir: "../../testdata/buildid-cache", Getenv: func(string) string { return "" }}

// analyzePath runs the analysis in-process on a recording with cfg's files
// and checks the profile is valid.
func analyzePath(t *testing.T, path string, cfg symbolize.Config, opts Options) *Result {
	t.Helper()
	r, err := perfdata.Open(path, nil)
	if err != nil {
		t.Fatal(err) // a missing committed fixture fails
	}
	defer r.Close()
	sess, err := symbolize.NewSession(cfg, r.Meta())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := Run(r, sess, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Profile.CheckValid(); err != nil {
		t.Fatalf("CheckValid: %v", err)
	}
	return res
}

func analyzeFixture(t *testing.T, path string, mode report.Mode) (*Result, map[siteKey]siteVal) {
	t.Helper()
	// RawSites: the expectation keys sites by the allocator's caller, the
	// raw leaf, as perf script shows it.
	res := analyzePath(t, path, fixtureFiles, Options{Attr: attribute.DefaultConfig(), Mode: mode, RawSites: true})
	return res, groupSites(res.Profile, func(s *profile.Sample) (siteKey, bool) {
		leaf := s.Location[0]
		if leaf.Mapping == nil || !strings.HasPrefix(leaf.Mapping.File, fixtureDir) || len(leaf.Line) == 0 {
			return siteKey{}, false // an allocation libc or the loader made for itself
		}
		return siteKey{comm: s.Label[report.CommLabel][0], site: leaf.Line[len(leaf.Line)-1].Function.Name, flags: strings.Join(s.Label[report.FlagLabel], ",")}, true
	})
}

// TestFixtureCounts: on every fixture recording, each allocation site's
// faults, allocation count, bytes and flags equal the expectation exactly.
// Faults per site = faults after return + faults the allocator itself took
// inside the new chunk [ptr-16, ptr+size) (in_block); a forked child's
// copy-on-write faults count against the parent's site.
func TestFixtureCounts(t *testing.T) {
	rows := loadExpect(t)
	files := perftest.Glob(t, "perf/*.data")
	for _, path := range files {
		name := filepath.Base(path)
		prog, variant := strings.Split(name, ".")[0], strings.Split(name, ".")[1]
		t.Run(strings.TrimSuffix(name, ".data"), func(t *testing.T) {
			res, got := analyzeFixture(t, path, report.ByAlloc)
			probed := map[string]bool{"malloc": true, "inherited": true}
			if variant == "allocs" {
				probed["calloc"], probed["realloc"] = true, true
			}
			want := map[siteKey]siteVal{}
			for _, r := range rows {
				if r.prog != prog || !probed[r.call] {
					continue
				}
				var fl []string
				if r.size <= 128 && r.call != "inherited" {
					fl = append(fl, "fast")
				}
				if r.flags["mmap"] {
					fl = append(fl, "mmap")
				}
				if r.flags["zero"] {
					fl = append(fl, "zero")
				}
				k := siteKey{r.comm, r.site, strings.Join(fl, ",")}
				v := want[k]
				v.faults += r.faults + r.inBlock
				v.allocs += r.count
				v.bytes += r.count * r.size
				want[k] = v
			}
			var keys []siteKey
			for k := range want {
				keys = append(keys, k)
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					keys = append(keys, k)
				}
			}
			sort.Slice(keys, func(i, j int) bool { return keys[i].site+keys[i].flags < keys[j].site+keys[j].flags })
			for _, k := range keys {
				if got[k] != want[k] {
					t.Errorf("%s %s [%s]: got faults=%d allocs=%d bytes=%d, want faults=%d allocs=%d bytes=%d",
						k.comm, k.site, k.flags, got[k].faults, got[k].allocs, got[k].bytes, want[k].faults, want[k].allocs, want[k].bytes)
				}
			}
			st := res.Summary.Tracker
			if st.UnpairedEntries+st.UnpairedReturns != 0 {
				t.Errorf("unpaired entries %d returns %d on a recording without losses", st.UnpairedEntries, st.UnpairedReturns)
			}
		})
	}
}

// TestProfileInPprof: go tool pprof shows the sites by name without the
// binaries, and -tagfocus=flag=mmap keeps only the mmap'd allocation.
func TestProfileInPprof(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not in PATH")
	}
	res, _ := analyzeFixture(t, "../../testdata/perf/basic.plain.data", report.ByAlloc)
	path := filepath.Join(t.TempDir(), "faults.pb.gz")
	reporttest.Write(t, path, res.Profile)
	// No binaries: pprof must take the names from the profile. (HOME
	// stays: the go command finds its build cache there, and building
	// pprof afresh takes minutes on a busy machine.)
	run := func(args ...string) string {
		cmd := exec.Command(goTool, append([]string{"tool", "pprof", "-top", "-nodecount=200"}, append(args, path)...)...)
		cmd.Env = append(os.Environ(), "PPROF_BINARY_PATH=/nonexistent")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pprof %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	top := run()
	for _, fn := range []string{"make_matrix", "make_index", "make_buckets", "make_table", "build_tree"} {
		if !strings.Contains(top, fn) {
			t.Errorf("pprof -top does not name %s:\n%s", fn, top)
		}
	}
	mm := run("-tagfocus=flag=mmap")
	if !strings.Contains(mm, "make_matrix") || strings.Contains(mm, "make_index") {
		t.Errorf("-tagfocus=flag=mmap should keep make_matrix only:\n%s", mm)
	}
}

// TestByTouch: in touch mode the memset faults of make_index carry the
// memset leaf and alloc_site names make_index; the one fault malloc itself
// took (the new top's header, in_block in expect.tsv) has a malloc leaf.
func TestByTouch(t *testing.T) {
	res, _ := analyzeFixture(t, "../../testdata/perf/basic.plain.data", report.ByTouch)
	var n, inMalloc int64
	for _, s := range res.Profile.Sample {
		if site := s.Label["alloc_site"]; len(site) == 1 && strings.HasPrefix(site[0], "make_index ") {
			switch {
			case isMemset(s.Location):
				n += s.Value[0]
			case len(s.Location) > 0 && len(s.Location[0].Line) > 0 && strings.Contains(s.Location[0].Line[len(s.Location[0].Line)-1].Function.Name, "malloc"):
				inMalloc += s.Value[0]
			default:
				t.Errorf("make_index fault stack leaf is neither memset nor malloc: %v", s.Location[0].Line)
			}
		}
	}
	if n != 9 || inMalloc != 1 {
		t.Errorf("faults with alloc_site make_index: %d in memset, %d in malloc; want 9 and 1 (expect.tsv: faults, in_block)", n, inMalloc)
	}
}

func isMemset(locs []*profile.Location) bool {
	if len(locs) == 0 {
		return false
	}
	for _, l := range locs[0].Line {
		if isMemsetFamily(l.Function.Name) {
			return true
		}
	}
	return false
}

// Tests of Analyze on recordings: testdata/mixed (record's shape),
// testdata/heapgrow and, when present, the real programs of gen-real.sh.

// The testdata/mixed recordings have faultline record's shape:
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
// 262144 bytes each) split 3:1 like the 4 stacked ones. Faults malloc takes: a 64 KiB
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
	if len(res.Profile.Comments) != 1 || len(losses) != len(res.Summary.Events) {
		t.Fatalf("profile comments %q: want one loss line naming every event (%d)", res.Profile.Comments, len(res.Summary.Events))
	}
	for i, l := range losses {
		if e := res.Summary.Events[i]; l.Name != e.Name || l.Role != e.Role || l.Samples != e.Samples || l.Lost != e.Lost {
			t.Errorf("comment %d: %+v, event %+v", i, l, e)
		}
	}
}

var threadLabel = regexp.MustCompile(`^[1-9][0-9]* heapgrow$`)

// analyzeDir analyzes the recording testdata/DIR/NAME.data with the symfs
// committed next to it (testdata/DIR/gen.sh makes both; see its README).
func analyzeDir(t *testing.T, dir, name string, mode report.Mode) *Result {
	t.Helper()
	files := symbolize.Config{Symfs: "../../testdata/" + dir + "/symfs", BuildIDDir: "../../testdata/buildid-cache", Getenv: func(string) string { return "" }}
	return analyzePath(t, "../../testdata/"+dir+"/"+name+".data", files, Options{Attr: attribute.DefaultConfig(), Mode: mode})
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
	res := analyzeDir(t, "heapgrow", "heapgrow", report.ByAlloc)
	// Sites by the function of the leaf location's outermost line.
	sites := sumSites(res.Profile, func(s *profile.Sample) string {
		if len(s.Location) == 0 || len(s.Location[0].Line) == 0 {
			return ""
		}
		ln := s.Location[0].Line
		// One process, one thread: the thread label is "PID heapgrow"
		// (the name from the COMM record exec wrote).
		if th := s.Label[report.ThreadLabel]; len(th) != 1 || !threadLabel.MatchString(th[0]) {
			t.Errorf("thread label %q", th)
		}
		return ln[len(ln)-1].Function.Name
	})
	var inside int64
	for _, st := range sites {
		inside += st.inside
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
	res := analyzeDir(t, "heapgrow", "containers", report.ByAlloc)
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

// The real-program recordings (testdata/gen-real.sh: Debian's python3, xz -T2
// and gcc -c, which forks and execs cc1 and as) are too big to commit. When
// they are present, TestRealSitesMatchScript checks faultline's per-site
// counts against testdata/attribute_from_script.py, an independent
// attributor over `perf script` text (perf's decoder and unwinder), which
// implements the tracker's documented semantics on its own.

// realDefault are the recordings checked unless FAULTLINE_REAL_ALL is set:
// one per program plus gcc's allocs variant (calloc/realloc probes, 8836
// lost samples).
var realDefault = []string{"python3.plain", "xz.plain", "gcc.plain", "gcc.allocs"}

// realSite is an allocation site keyed by its return address: the dso and
// the address relative to the dso's mapping (addr - start + pgoff), as perf
// prints it.
type realSite struct {
	dso string
	rel uint64
}

type realCounts struct{ faults, allocs, bytes int64 }

func realDir(t *testing.T) string {
	dir := os.Getenv("FAULTLINE_REAL_DIR")
	if dir == "" {
		dir = "/tmp/faultline-real"
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.data")); len(m) == 0 {
		t.Skipf("no real-program recordings in %s (make them with sudo testdata/gen-real.sh %s, or set FAULTLINE_REAL_DIR)", dir, dir)
	}
	for _, tool := range []string{"perf", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not in PATH: the independent attributor needs it", tool)
		}
	}
	return dir
}

// scriptSites runs testdata/attribute_from_script.py and parses its output.
// args come before the recording (--symfs DIR --buildid-dir DIR).
func scriptSites(path string, args ...string) (map[realSite]realCounts, map[string]int64, error) {
	cmd := exec.Command("python3", append(append([]string{"../../testdata/attribute_from_script.py"}, args...), path)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("attribute_from_script.py %s: %v\n%s", path, err, stderr.Bytes())
	}
	sites := map[realSite]realCounts{}
	totals := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		switch {
		case f[0] == "site" && len(f) >= 6:
			rel, err1 := strconv.ParseUint(f[2], 16, 64)
			n, err2 := strconv.ParseInt(f[3], 10, 64)
			a, err3 := strconv.ParseInt(f[4], 10, 64)
			b, err4 := strconv.ParseInt(f[5], 10, 64)
			if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
				return nil, nil, fmt.Errorf("attribute_from_script.py: bad line %q", sc.Text())
			}
			sites[realSite{f[1], rel}] = realCounts{n, a, b}
		case strings.HasPrefix(f[0], "total "):
			for _, kv := range strings.Fields(f[0])[1:] {
				k, v, _ := strings.Cut(kv, "=")
				totals[k], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return sites, totals, nil
}

// faultlineSites runs the analysis in-process on the machine's own files
// (perf's build-id cache, then the paths the recording names) and groups the
// --by alloc profile by its leaf location: allocator frames are dropped, so
// the leaf's address is the allocation's call (its return address - 1).
func faultlineSites(t *testing.T, path string, cfg symbolize.Config) (*Result, map[realSite]realCounts) {
	t.Helper()
	r, err := perfdata.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sess, err := symbolize.NewSession(cfg, r.Meta())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	// RawSites: the script keys sites by the raw leaf, the allocator's
	// caller.
	res, err := Run(r, sess, Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc, RawSites: true})
	if err != nil {
		t.Fatal(err)
	}
	sites := map[realSite]realCounts{}
	for _, s := range res.Profile.Sample {
		if len(s.Label["class"]) > 0 || len(s.Location) == 0 {
			continue
		}
		// The leaf is the allocation's call site: its address is the
		// return address - 1 (as perf prints callers); the script keys
		// sites by the return address.
		leaf := s.Location[0]
		k := realSite{"[unknown]", leaf.Address + 1}
		if m := leaf.Mapping; m != nil {
			k = realSite{m.File, leaf.Address + 1 - m.Start + m.Offset}
		}
		c := sites[k]
		c.faults += s.Value[0]
		c.allocs += s.Value[1]
		c.bytes += s.Value[2]
		sites[k] = c
	}
	return res, sites
}

// TestRealSitesMatchScript: on recordings of programs we did not write, the
// faults, allocations and bytes of every allocation site (keyed by return
// address) equal those of the independent attributor over perf script's text.
// FAULTLINE_REAL_ALL=1 checks every recording in the directory (~2-3 minutes
// on 2 cores) instead of the default four.
func TestRealSitesMatchScript(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real recordings take a while")
	}
	dir := realDir(t)
	var files []string
	if os.Getenv("FAULTLINE_REAL_ALL") != "" {
		files, _ = filepath.Glob(filepath.Join(dir, "*.data"))
	} else {
		var missing []string
		for _, n := range realDefault {
			if p := filepath.Join(dir, n+".data"); fileExists(p) {
				files = append(files, p)
			} else {
				missing = append(missing, n+".data")
			}
		}
		if len(missing) > 0 {
			t.Logf("%s lacks %s (sudo testdata/gen-real.sh %s makes them)", dir, strings.Join(missing, ", "), dir)
		}
	}
	if len(files) == 0 {
		t.Skipf("none of the real recordings to check is in %s (sudo testdata/gen-real.sh %s makes them; FAULTLINE_REAL_ALL=1 checks every *.data there)", dir, dir)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".data"), func(t *testing.T) {
			compareWithScript(t, path, symbolize.Config{})
		})
	}
}

// TestFixtureSitesMatchScript: the committed fixture recordings
// (testdata/perf, testdata/heapgrow), their binaries from the committed
// symfs, agree site for site with attribute_from_script.py as the real
// recordings do. perf (its decoder and unwinder) is the independent side.
func TestFixtureSitesMatchScript(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs perf script on every fixture")
	}
	for _, tool := range []string{"perf", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not in PATH: the independent attributor needs it", tool)
		}
	}
	sets := []struct{ glob, symfs, buildIDs string }{
		{"../../testdata/perf/*.data", "../../testdata/symfs", "../../testdata/buildid-cache"},
		{"../../testdata/heapgrow/*.data", "../../testdata/heapgrow/symfs", "../../testdata/buildid-cache"},
	}
	for _, set := range sets {
		files, _ := filepath.Glob(set.glob)
		if len(files) == 0 {
			t.Fatalf("no recordings match %s: the committed fixtures are missing", set.glob)
		}
		symfs, _ := filepath.Abs(set.symfs)
		bids, _ := filepath.Abs(set.buildIDs)
		cfg := symbolize.Config{Symfs: set.symfs, BuildIDDir: set.buildIDs, Getenv: func(string) string { return "" }}
		for _, path := range files {
			t.Run(strings.TrimSuffix(filepath.Base(path), ".data"), func(t *testing.T) {
				compareWithScript(t, path, cfg, "--symfs", symfs, "--buildid-dir", bids)
			})
		}
	}
}

// compareWithScript checks faultline's per-site faults, allocations and
// bytes of one recording against attribute_from_script.py's.
func compareWithScript(t *testing.T, path string, cfg symbolize.Config, scriptArgs ...string) {
	type scriptOut struct {
		sites  map[realSite]realCounts
		totals map[string]int64
		err    error
	}
	ch := make(chan scriptOut, 1)
	go func() {
		s, tot, err := scriptSites(path, scriptArgs...)
		ch <- scriptOut{s, tot, err}
	}()
	res, ours := faultlineSites(t, path, cfg)
	so := <-ch
	if so.err != nil {
		t.Fatal(so.err)
	}
	theirs := so.sites
	keys := map[realSite]bool{}
	for k := range ours {
		keys[k] = true
	}
	for k := range theirs {
		keys[k] = true
	}
	var sorted []realSite
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].dso != sorted[j].dso {
			return sorted[i].dso < sorted[j].dso
		}
		return sorted[i].rel < sorted[j].rel
	})
	var same, faultSites, sameFaultSites int
	var oursTotal, theirsTotal int64
	for _, k := range sorted {
		o, p := ours[k], theirs[k]
		oursTotal += o.faults
		theirsTotal += p.faults
		if o == p {
			same++
		}
		if o.faults != 0 || p.faults != 0 {
			faultSites++
			if o.faults == p.faults {
				sameFaultSites++
			}
		}
		if o != p {
			t.Errorf("site %s+%#x: faultline faults=%d allocs=%d bytes=%d; perf script faults=%d allocs=%d bytes=%d",
				k.dso, k.rel, o.faults, o.allocs, o.bytes, p.faults, p.allocs, p.bytes)
		}
	}
	st := res.Summary.Tracker
	t.Logf("sites: %d of %d identical (faults, allocs, bytes); with faults: %d of %d equal; attributed faults: faultline %d, perf script %d (of %d / %d faults); lost samples %d",
		same, len(sorted), sameFaultSites, faultSites, oursTotal, theirsTotal, st.Faults, so.totals["faults"], res.Summary.LostTotal)
	t.Logf("faultline: entries %d returns %d unpaired entries %d returns %d ret-ip mismatches %d; perf script: entries %d returns %d unpaired entries %d returns %d ret-ip mismatches %d",
		st.Entries, st.Returns, st.UnpairedEntries, st.UnpairedReturns, st.RetIPMismatches,
		so.totals["entries"], so.totals["returns"], so.totals["unpaired_entries"], so.totals["unpaired_returns"], so.totals["retip_mismatches"])
	if so.totals["inflight"] != int64(st.InFlight) || so.totals["in_allocator"] != int64(st.InAllocator) {
		t.Errorf("faults inside the allocator: faultline %d (%d on its own memory), perf script %d (%d)",
			st.InFlight, st.InAllocator, so.totals["inflight"], so.totals["in_allocator"])
	}
	if oursTotal != int64(st.Attributed) {
		t.Errorf("profile holds %d attributed faults, the tracker counted %d", oursTotal, st.Attributed)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
