package analyze

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
)

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
	res, err := Run(r, sess, Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc})
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
		for _, n := range realDefault {
			if p := filepath.Join(dir, n+".data"); fileExists(p) {
				files = append(files, p)
			}
		}
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
