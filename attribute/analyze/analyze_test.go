package analyze

import (
	"bufio"
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
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
	data, err := os.ReadFile(perftest.Testdata(t, "expect", "expect.tsv"))
	if err != nil {
		t.Fatal(err)
	}
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
	res := analyzePath(t, path, fixtureFiles, Options{Attr: attribute.DefaultConfig(), Mode: mode})
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
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Profile.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
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
