package diff

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/perfdata"
	"github.com/google/pprof/profile"
)

// frame and sample describe a synthetic faultline profile (reporttest).
type (
	frame  = reporttest.Frame
	sample = reporttest.Sample
)

// build makes one build's profile (reporttest.Build).
func build(t *testing.T, start, stride uint64, dir string, samples []sample) *profile.Profile {
	return reporttest.Build(t, start, stride, dir, samples)
}

func baseSamples() []sample {
	return []sample{
		{Stack: []frame{reporttest.ReadInput, reporttest.Main}, Flags: []string{"mmap"}, Comm: "prog", Values: [3]int64{60, 6, 24576}},
		{Stack: []frame{reporttest.ReadInput, reporttest.Main}, Flags: []string{"mmap"}, Comm: "prog:worker", Values: [3]int64{40, 4, 16384}},
		{Stack: []frame{reporttest.BuildIndex, reporttest.Main}, Flags: []string{"zero"}, Values: [3]int64{50, 5, 5000}},
		{Stack: []frame{reporttest.ParseLine, reporttest.Main}, Flags: []string{"fast"}, Values: [3]int64{4, 2, 64}},
		{Stack: []frame{reporttest.OldCache, reporttest.Main}, Values: [3]int64{20, 1, 8192}},
		{Class: "[stack]", Stack: []frame{reporttest.Main}, Values: [3]int64{30, 0, 0}},
	}
}

func newSamples() []sample {
	return []sample{
		{Stack: []frame{reporttest.ReadInput, reporttest.Main}, Flags: []string{"mmap"}, Values: [3]int64{130, 10, 40960}},
		{Stack: []frame{reporttest.BuildIndex, reporttest.Main}, Flags: []string{"zero"}, Values: [3]int64{40, 5, 5000}},
		{Stack: []frame{reporttest.ParseLine, reporttest.Main}, Flags: []string{"fast"}, Values: [3]int64{6, 3, 96}},
		{Stack: []frame{reporttest.NewTable, reporttest.Main}, Flags: []string{"fast", "zero"}, Values: [3]int64{12, 12, 1200}},
		{Class: "[stack]", Stack: []frame{reporttest.BuildIndex, reporttest.Main}, Values: [3]int64{31, 0, 0}},
	}
}

// Two builds: different load addresses, strides and checkout paths.
func profiles(t *testing.T) (base, head *profile.Profile) {
	return build(t, 0x400000, 0x10, "/build/a/src", baseSamples()),
		build(t, 0x555555554000, 0x24, "/ci/b/src", newSamples())
}

func siteByName(t *testing.T, r *Result, prefix string) Site {
	t.Helper()
	for _, s := range r.Sites {
		if strings.HasPrefix(s.Name, prefix) {
			return s
		}
	}
	t.Fatalf("no site %q in %+v", prefix, r.Sites)
	return Site{}
}

func TestCompareFaults(t *testing.T) {
	base, head := profiles(t)
	r, err := compareOne(base, head, Options{Metric: "faults", Threshold: 0.1, MinDelta: 8})
	if err != nil {
		t.Fatal(err)
	}
	// Totals: base 60+40+50+4+20+30 = 204, new 130+40+6+12+31 = 219.
	if r.Total != (Row{204, 219}) {
		t.Errorf("total = %+v, want {204 219}", r.Total)
	}
	if r.Unattributed != (Row{30, 31}) {
		t.Errorf("unattributed = %+v, want {30 31}", r.Unattributed)
	}
	// flag rows: fast 4 → 6+12, mmap 100 → 130, zero 50 → 40+12.
	wantFlags := []FlagRow{{"fast", Row{4, 18}}, {"mmap", Row{100, 130}}, {"zero", Row{50, 52}}}
	if len(r.Flags) != len(wantFlags) {
		t.Fatalf("flags = %+v, want %+v", r.Flags, wantFlags)
	}
	for i := range wantFlags {
		if r.Flags[i] != wantFlags[i] {
			t.Errorf("flag %d = %+v, want %+v", i, r.Flags[i], wantFlags[i])
		}
	}
	for _, tc := range []struct {
		name      string
		row       Row
		status    Status
		regressed bool
	}{
		// Same frames at different addresses and paths: one site.
		{"read_input io.c:12 ← main", Row{100, 130}, StatusGrew, true}, // +30 = 30% > 10%, ≥ 8
		{"build_index index.c:88", Row{50, 40}, StatusShrank, false},
		{"parse_line parse.c:30", Row{4, 6}, StatusGrew, false}, // +50% but +2 < 8
		{"old_cache", Row{20, 0}, StatusVanished, false},
		{"new_table", Row{0, 12}, StatusNew, true}, // new and ≥ 8
		{"[stack]", Row{30, 31}, StatusGrew, false},
	} {
		s := siteByName(t, r, tc.name)
		if s.Row != tc.row || s.Status != tc.status || s.Regressed != tc.regressed {
			t.Errorf("%s: got %+v %s regressed=%v, want %+v %s regressed=%v", tc.name, s.Row, s.Status, s.Regressed, tc.row, tc.status, tc.regressed)
		}
	}
	if len(r.Sites) != 6 || r.Regressions != 2 {
		t.Errorf("%d sites, %d regressions; want 6, 2", len(r.Sites), r.Regressions)
	}
	// Largest absolute change first: read_input +30, old_cache -20, new_table +12, ...
	var order []string
	for _, s := range r.Sites {
		order = append(order, strings.Fields(s.Name)[0])
	}
	if got, want := strings.Join(order, " "), "read_input old_cache new_table build_index parse_line [stack]"; got != want {
		t.Errorf("order = %s, want %s", got, want)
	}
	if s := siteByName(t, r, "[stack]"); s.Class != "[stack]" || s.Frames != nil {
		t.Errorf("class site = %+v", s)
	}
}

func TestCompareOtherMetrics(t *testing.T) {
	base, head := profiles(t)
	r, err := compareOne(base, head, Options{Metric: "alloc_space", Threshold: 0.1, MinDelta: DefaultMinDelta("alloc_space")})
	if err != nil {
		t.Fatal(err)
	}
	// 24576+16384+5000+64+8192 = 54216; 40960+5000+96+1200 = 47256.
	if r.Total != (Row{54216, 47256}) || r.Unit != "bytes" {
		t.Errorf("total = %+v %s", r.Total, r.Unit)
	}
	// read_input grew by 0 bytes; nothing reaches 64 KiB.
	if r.Regressed() {
		t.Errorf("alloc_space regressed: %+v", r.Sites)
	}
	r, err = compareOne(base, head, Options{Metric: "allocs", Threshold: 0.1, MinDelta: 8})
	if err != nil {
		t.Fatal(err)
	}
	// allocs: new_table 0 → 12 is the only change of 8 or more.
	if r.Regressions != 1 || !siteByName(t, r, "new_table").Regressed {
		t.Errorf("allocs: %d regressions", r.Regressions)
	}
	if _, err := compareOne(base, &profile.Profile{SampleType: []*profile.ValueType{{Type: "cpu", Unit: "nanoseconds"}}}, Options{Metric: "faults"}); err == nil || !strings.Contains(err.Error(), `no "faults" samples`) {
		t.Errorf("foreign profile: err = %v", err)
	}
}

func TestRegressedBoundaries(t *testing.T) {
	opts := Options{Threshold: 0.1, MinDelta: 8}
	for _, tc := range []struct {
		row   Row
		noise int64
		want  bool
	}{
		{Row{100, 110}, 0, false}, // exactly 10%: not more than
		{Row{100, 111}, 0, true},
		{Row{10, 17}, 0, false}, // 70% but only +7
		{Row{10, 18}, 0, true},  // +8 is at least min-delta
		{Row{0, 7}, 0, false},   // new but small
		{Row{0, 8}, 0, true},    // new: infinite growth
		{Row{50, 10}, 0, false}, // improvement
		{Row{0, 0}, 0, false},
		{Row{100, 130}, 30, false}, // +30 is within the baselines' spread
		{Row{100, 131}, 30, true},
	} {
		if got := regressed(tc.row, tc.noise, opts); got != tc.want {
			t.Errorf("regressed(%+v, noise %d) = %v, want %v", tc.row, tc.noise, got, tc.want)
		}
	}
	if g := (Row{0, 5}).growth(); !math.IsInf(g, 1) {
		t.Errorf("growth of a new site = %v", g)
	}
}

func TestParseThreshold(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  string
	}{
		{"10%", 0.1, ""},
		{"0.1", 0.1, ""},
		{"2.5%", 0.025, ""},
		{"250%", 2.5, ""},
		{"0", 0, ""},
		{"10", 0, "ambiguous"},
		{"ten", 0, "invalid"},
		{"-5%", 0, "invalid"},
		{"", 0, "invalid"},
	} {
		got, err := ParseThreshold(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseThreshold(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("ParseThreshold(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestProfile(t *testing.T) {
	base, head := profiles(t)
	d, err := profileOne(base, head)
	if err != nil {
		t.Fatal(err)
	}
	// Round trip through the wire format.
	d = reporttest.RoundTrip(t, d)
	var total, baseTotal int64
	byLeaf := map[string]int64{}
	for _, s := range d.Sample {
		isBase := s.HasLabel(baseLabel, "true")
		if isBase {
			baseTotal += s.Value[0]
			if s.Value[0] > 0 {
				t.Errorf("base sample with positive value %v", s.Value)
			}
		}
		total += s.Value[0]
		byLeaf[s.Location[0].Line[0].Function.Name] += s.Value[0]
	}
	// Sum is NEW-BASE = 219-204; base part is -204.
	if total != 15 || baseTotal != -204 {
		t.Errorf("diff profile total %d, base part %d; want 15, -204", total, baseTotal)
	}
	if byLeaf["read_input"] != 30 || byLeaf["old_cache"] != -20 || byLeaf["new_table"] != 12 {
		t.Errorf("per leaf: %v", byLeaf)
	}
	// Profile consumes its inputs (no copies): every sample of both is in
	// the diff profile, BASE's negated.
	if len(d.Sample) != len(base.Sample)+len(newSamples()) {
		t.Errorf("diff profile has %d samples, want BASE's %d and NEW's %d", len(d.Sample), len(base.Sample), len(newSamples()))
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	base, _ := profiles(t)
	good := filepath.Join(dir, "good.pb.gz")
	reporttest.Write(t, good, base)
	if p, err := load(good); err != nil || len(p.Sample) != len(base.Sample) {
		t.Fatalf("Load(good) = %v, %v", p, err)
	}
	if perf, err := isPerfData(good); perf || err != nil {
		t.Errorf("IsPerfData(profile) = %v, %v", perf, err)
	}

	junk := filepath.Join(dir, "junk.txt")
	os.WriteFile(junk, []byte("hello, world\n"), 0o644)
	_, err := load(junk)
	var npe *notProfileError
	if !errors.As(err, &npe) || npe.Path != junk || strings.Contains(err.Error(), "\n") {
		t.Errorf("Load(junk) err = %v", err)
	}

	for _, magic := range []string{perfdata.MagicLE, perfdata.MagicBE} {
		perfFile := filepath.Join(dir, magic)
		os.WriteFile(perfFile, append([]byte(magic), make([]byte, 100)...), 0o644)
		if perf, err := isPerfData(perfFile); !perf || err != nil {
			t.Errorf("IsPerfData(%s) = %v, %v", magic, perf, err)
		}
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("PER"), 0o644)
	if perf, err := isPerfData(short); perf || err != nil {
		t.Errorf("IsPerfData(short) = %v, %v", perf, err)
	}
}

// TestSitesClassesAndFlags: sites named in the user's code, classes not gated by default,
// the program's own file one class whatever the binary is called, no
// all-zero flag rows, JSON without HTML escaping.
func TestSitesClassesAndFlags(t *testing.T) {
	vec := frame{Func: "std::vector<int>::_M_realloc_insert", File: "/usr/include/c++/12/bits/vector.tcc", Line: 453}
	pushBack := frame{Func: "std::vector::push_back", File: "/usr/include/c++/12/bits/stl_vector.h", Line: 1294}
	fill := frame{Func: "app::Store::fill", File: "app.cpp", Line: 31}
	base := build(t, 0x400000, 0x10, "/build/a/src", []sample{
		{Stack: []frame{vec, pushBack, fill, reporttest.Main}, Values: [3]int64{100, 4, 4096}},
		{Class: "[heap]", Stack: []frame{reporttest.Main}, Values: [3]int64{10, 0, 0}},
		{Class: "[file] prog", Stack: []frame{reporttest.Main}, Values: [3]int64{5, 0, 0}},
		{Stack: []frame{reporttest.ParseLine, reporttest.Main}, Flags: []string{"fast"}, Values: [3]int64{0, 3, 96}}, // no faults: no flag row
	})
	head := build(t, 0x555555554000, 0x24, "/ci/b/src", []sample{
		{Stack: []frame{vec, pushBack, fill, reporttest.Main}, Values: [3]int64{105, 4, 4096}},
		{Class: "[heap]", Stack: []frame{reporttest.Main}, Values: [3]int64{50, 0, 0}},
		{Class: "[file] prog2", Stack: []frame{reporttest.Main}, Values: [3]int64{5, 0, 0}},
		{Stack: []frame{reporttest.ParseLine, reporttest.Main}, Flags: []string{"fast"}, Values: [3]int64{0, 3, 96}},
	})
	head.Mapping[0].File = "/ci/b/src/prog2" // the binary was renamed
	opts := Options{Metric: "faults", Threshold: 0.1, MinDelta: 8}
	r, err := compareOne(base, head, opts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range r.Sites {
		names = append(names, s.Name)
	}
	// [heap] grew 10 -> 50 but is not gated; fill grew 5% (under 10%);
	// [file] prog and [file] prog2 are one unchanged row, named as NEW
	// names it.
	want := []string{"[heap]", "app::Store::fill app.cpp:31 (via std::vector::push_back) ← main", "[file] prog2"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("sites %q, want %q", names, want)
	}
	if r.Regressed() || r.UngatedClasses != 1 {
		t.Errorf("regressions %d, ungated classes %d; want 0 and 1", r.Regressions, r.UngatedClasses)
	}
	if len(r.Flags) != 0 {
		t.Errorf("flag rows %+v: the fast flag holds no faults in either profile", r.Flags)
	}
	opts.GateClasses = true
	if r, _ := compareOne(base, head, opts); r.Regressions != 1 || r.UngatedClasses != 0 {
		t.Errorf("--gate-classes: regressions %d, ungated %d; want 1 and 0", r.Regressions, r.UngatedClasses)
	}
	opts.RawSites = true
	r, _ = compareOne(base, head, opts)
	if s := r.Sites[1].Name; !strings.HasPrefix(s, "std::vector<int>::_M_realloc_insert vector.tcc:453 ← ") {
		t.Errorf("raw site name %q", s)
	}
	var buf bytes.Buffer
	if err := Render(&buf, r, "json", RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `\u003c`) || !strings.Contains(buf.String(), "std::vector<int>") {
		t.Errorf("JSON escapes HTML characters:\n%s", buf.String())
	}
}

// TestKeySite: by default a site is its site frame's function, file and
// library call, and the call's rank among that function's allocating lines:
// a comment line added above the calls (every line +1), or callers that
// differ below the site frame, change nothing; a site that doubled still
// fails, named as NEW has it. --key line keys by the lines and the stack,
// and fails the moved program.
func TestKeySite(t *testing.T) {
	small := func(line int64) frame { return frame{Func: "make_small", File: "bench.c", Line: line} }
	caller := frame{Func: "run", File: "bench.c", Line: 60}
	other := frame{Func: "run_again", File: "bench.c", Line: 70}
	idx := func(line int64) frame { return frame{Func: "app::index", File: "app.cpp", Line: line} }
	prog := func(shift int64, smallB, smallC int64, deep frame) []sample {
		return []sample{
			// two calls in make_small, at lines 8 and 12
			{Stack: []frame{small(8 + shift), caller, reporttest.Main}, Values: [3]int64{2579, 1, 1 << 20}},
			{Stack: []frame{small(12 + shift), deep, reporttest.Main}, Values: [3]int64{smallB, 100, 6400}},
			{Stack: []frame{small(12 + shift), caller, reporttest.Main}, Values: [3]int64{smallC, 100, 6400}},
			// one line, two library calls: two sites
			{Stack: []frame{idx(26 + shift), reporttest.Main}, Via: "std::map::operator[]", Values: [3]int64{80, 5000, 1 << 18}},
			{Stack: []frame{idx(26 + shift), reporttest.Main}, Via: "std::__cxx11::basic_string::basic_string", Values: [3]int64{65, 5000, 1 << 17}},
		}
	}
	base := build(t, 0x400000, 0x10, "/a", prog(0, 30, 10, caller))
	moved := build(t, 0x500000, 0x18, "/b", prog(1, 10, 30, other))
	doubled := build(t, 0x500000, 0x18, "/b", prog(1, 60, 20, other))
	opts := Options{Metric: "faults", Threshold: 0.1, MinDelta: 8}

	r, err := compareOne(base, moved, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Regressed() || len(r.Sites) != 4 {
		t.Fatalf("moved lines: %d regressions, %d sites %+v; want 0 and 4", r.Regressions, len(r.Sites), r.Sites)
	}
	for _, s := range r.Sites {
		if s.Status != StatusSame {
			t.Errorf("moved lines: %s %s %+v, want same", s.Name, s.Status, s.Row)
		}
	}
	// NEW's lines name the sites; the via label tells the index sites apart.
	siteByName(t, r, "make_small bench.c:13")
	siteByName(t, r, "app::index app.cpp:27 (via std::map::operator[])")
	siteByName(t, r, "app::index app.cpp:27 (via std::__cxx11::basic_string::basic_string)")

	r, _ = compareOne(base, doubled, opts)
	if r.Regressions != 1 {
		t.Fatalf("doubled: %d regressions, want 1: %+v", r.Regressions, r.Sites)
	}
	if s := r.Sites[0]; !s.Regressed || s.Row != (Row{40, 80}) || !strings.HasPrefix(s.Name, "make_small bench.c:13") {
		t.Errorf("doubled: top site %+v, want make_small bench.c:13 40 → 80, regressed", s)
	}

	opts.Key = KeyLine
	r, _ = compareOne(base, moved, opts)
	// BASE's 3 stacks (make_small:8 ← run, make_small:12 ← run, index:26)
	// vanish, NEW's 4 (make_small:12 has a second caller) are new.
	if len(r.newSites()) != 4 || len(r.vanishedSites()) != 3 || r.Regressions != 4 {
		t.Errorf("--key line, moved: %d new, %d vanished, %d regressions; want 4, 3, 4", len(r.newSites()), len(r.vanishedSites()), r.Regressions)
	}
	opts.Key = "stack"
	if _, err := compareOne(base, moved, opts); err == nil {
		t.Error("unknown key: no error")
	}
}

// TestCompareBases: with several baselines BASE is their mean and each
// site's spread over them its noise floor: growth within the spread passes,
// growth past it fails; a site present in one baseline only has the
// whole of it as spread.
func TestCompareBases(t *testing.T) {
	runOf := func(read, flaky int64) *profile.Profile {
		ss := []sample{{Stack: []frame{reporttest.ReadInput, reporttest.Main}, Values: [3]int64{read, 1, 4096}}}
		if flaky > 0 {
			ss = append(ss, sample{Stack: []frame{reporttest.NewTable, reporttest.Main}, Values: [3]int64{flaky, 1, 64}})
		}
		return build(t, 0x400000, 0x10, "/a", ss)
	}
	bases := []*profile.Profile{runOf(100, 0), runOf(120, 20), runOf(110, 0)}
	opts := Options{Metric: "faults", Threshold: 0.1, MinDelta: 8}
	for _, tc := range []struct {
		read, flaky int64
		regressions int
	}{
		{130, 20, 0}, // read_input: mean 110, spread 20, +20; new_table: mean 7 (20/3), spread 20, +13
		{131, 28, 2}, // +21 > 20; +21 > 20
		{100, 0, 0},
	} {
		r, err := CompareBases(bases, runOf(tc.read, tc.flaky), opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.Regressions != tc.regressions || r.Bases != 3 {
			t.Errorf("NEW read_input %d, new_table %d: %d regressions (%d bases), want %d: %+v", tc.read, tc.flaky, r.Regressions, r.Bases, tc.regressions, r.Sites)
		}
		if s := siteByName(t, r, "read_input"); s.Base != 110 || s.Noise != 20 {
			t.Errorf("read_input base %d noise %d, want 110 and 20", s.Base, s.Noise)
		}
		if tc.flaky > 0 {
			if s := siteByName(t, r, "new_table"); s.Base != 7 || s.Noise != 20 || s.Status != StatusGrew {
				t.Errorf("new_table %+v, want base 7, noise 20, grew", s)
			}
		}
	}
	// One baseline is Compare.
	r1, _ := CompareBases(bases[:1], runOf(130, 20), opts)
	r2, _ := compareOne(bases[0], runOf(130, 20), opts)
	if r1.Regressions != 2 || r2.Regressions != 2 {
		t.Errorf("one baseline: %d and %d regressions, want 2", r1.Regressions, r2.Regressions)
	}
}

// TestPairGroup: a baseline's calls of one function pair with NEW's in
// source order when both have as many; by the one line shift that explains
// every call of the side with fewer when they do not (no shift first); a
// file only each side has is one file renamed; anything else is unmatched.
// A line only BASE has (a call NEW's run did not make) does not shift the
// others.
func TestPairGroup(t *testing.T) {
	c := func(file string, lines ...int64) []call {
		var out []call
		for _, l := range lines {
			out = append(out, call{file, l})
		}
		return out
	}
	pairs := func(base, new []call) map[call]call {
		m := map[call]call{}
		for i := range base {
			m[base[i]] = new[i]
		}
		return m
	}
	for _, tc := range []struct {
		name                   string
		base, new              []call
		want                   map[call]call
		unmatchedB, unmatchedN int
	}{
		{"shifted", c("a.c", 8, 12), c("a.c", 9, 13), pairs(c("a.c", 8, 12), c("a.c", 9, 13)), 0, 0},
		{"shifted onto each other", c("a.c", 16, 18), c("a.c", 18, 20), pairs(c("a.c", 16, 18), c("a.c", 18, 20)), 0, 0},
		{"one call not made", c("a.c", 300, 333), c("a.c", 333), pairs(c("a.c", 333), c("a.c", 333)), 0, 0},
		{"one call added", c("a.c", 333), c("a.c", 300, 333), pairs(c("a.c", 333), c("a.c", 333)), 0, 0},
		{"shifted, one call not made", c("a.c", 8, 12, 20), c("a.c", 9, 21), pairs(c("a.c", 8, 20), c("a.c", 9, 21)), 0, 0},
		{"two shifts explain it", c("a.c", 10, 20), c("a.c", 30), map[call]call{}, 2, 1},
		{"no shift explains it", c("a.c", 8, 12, 20), c("a.c", 9, 14), map[call]call{}, 3, 2},
		{"renamed file", c("a.c", 8, 12), c("b.c", 20, 30), pairs(c("a.c", 8, 12), c("b.c", 20, 30)), 0, 0},
		{"two files became two others", append(c("a.c", 8), c("b.c", 9)...), append(c("c.c", 8), c("d.c", 9)...), map[call]call{}, 2, 2},
		{"one of two files renamed", append(c("a.c", 8), c("b.c", 9)...), append(c("a.c", 10), c("c.c", 3)...), map[call]call{{"a.c", 8}: {"a.c", 10}, {"b.c", 9}: {"c.c", 3}}, 0, 0},
		{"new", nil, c("a.c", 1), map[call]call{}, 0, 0},
	} {
		p := pairGroup(tc.base, tc.new)
		if !maps.Equal(p.pairs, tc.want) || len(p.unmatchedBase) != tc.unmatchedB || len(p.unmatchedNew) != tc.unmatchedN {
			t.Errorf("%s: pairs %v, unmatched %v %v; want %v and %d, %d unmatched", tc.name, p.pairs, p.unmatchedBase, p.unmatchedNew, tc.want, tc.unmatchedB, tc.unmatchedN)
		}
	}
	alias := func(line int64) frame { return frame{Func: "read_alias_file", File: "localealias.c", Line: line} }
	base := build(t, 0x400000, 0x10, "/a", []sample{
		{Stack: []frame{alias(300), reporttest.Main}, Values: [3]int64{0, 5, 500}},
		{Stack: []frame{alias(333), reporttest.Main}, Values: [3]int64{39, 78, 117 << 10}},
	})
	head := build(t, 0x400000, 0x10, "/a", []sample{
		{Stack: []frame{alias(333), reporttest.Main}, Values: [3]int64{39, 78, 117 << 10}},
	})
	r, err := compareOne(base, head, Options{Metric: "faults", Threshold: 0.1, MinDelta: 8})
	if err != nil {
		t.Fatal(err)
	}
	if r.Regressed() || len(r.Sites) != 1 || r.Sites[0].Status != StatusSame {
		t.Errorf("a line only BASE allocated on: %+v, want read_alias_file:333 the same", r.Sites)
	}
}

// TestUnmatched: calls of one function that no pairing explains (three in
// BASE at 8, 12, 20; two in NEW at 9, 14) are one unmatched site holding
// both sides' sums (15+5+10 and 16+15), named by its function and the
// calls; it fails only when the sum grows past the rule.
func TestUnmatched(t *testing.T) {
	f := func(line int64) frame { return frame{Func: "make_small", File: "bench.c", Line: line} }
	prog := func(lines []int64, faults []int64) []sample {
		var out []sample
		for i, l := range lines {
			out = append(out, sample{Stack: []frame{f(l), reporttest.Main}, Values: [3]int64{faults[i], 1, 4096}})
		}
		return append(out, sample{Stack: []frame{reporttest.ReadInput, reporttest.Main}, Values: [3]int64{50, 1, 4096}})
	}
	base := build(t, 0x400000, 0x10, "/a", prog([]int64{8, 12, 20}, []int64{15, 5, 10}))
	opts := Options{Metric: "faults", Threshold: 0.1, MinDelta: 8}
	for _, tc := range []struct {
		faults    []int64
		regressed bool
	}{
		{[]int64{16, 15}, false}, // 30 → 31
		{[]int64{16, 60}, true},  // 30 → 76
	} {
		r, err := compareOne(base, build(t, 0x500000, 0x18, "/b", prog([]int64{9, 14}, tc.faults)), opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.Unmatched != 1 || len(r.Sites) != 2 {
			t.Fatalf("%v: %d unmatched, sites %+v; want 1 and 2 sites", tc.faults, r.Unmatched, r.Sites)
		}
		s := siteByName(t, r, "make_small [calls not paired one to one: BASE bench.c:8, bench.c:12, bench.c:20; NEW bench.c:9, bench.c:14]")
		if s.Status != StatusUnmatched || s.Base != 30 || s.New != tc.faults[0]+tc.faults[1] || s.Regressed != tc.regressed {
			t.Errorf("%v: %+v; want unmatched, 30 → %d, regressed %v", tc.faults, s, tc.faults[0]+tc.faults[1], tc.regressed)
		}
		var text bytes.Buffer
		if err := Render(&text, r, "text", RenderOptions{}); err != nil || !strings.Contains(text.String(), "Unmatched calls") {
			t.Errorf("text output has no unmatched section (%v):\n%s", err, text.String())
		}
	}
}
