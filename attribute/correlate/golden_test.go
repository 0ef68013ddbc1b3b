package correlate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
)

var update = flag.Bool("update", false, "rewrite testdata/profiles from this tree's profiles")

// goldenDir holds one text file per committed fault log, access log and
// way of naming instructions: Profile's result (what `faultline correlate
// -o` writes), rendered by reporttest.Text with one line per sample, so
// that a failure names the instructions whose faults changed.
const goldenDir = "testdata/profiles"

// goldenCase is one correlate run over committed fixtures.
type goldenCase struct {
	name   string
	faults func(t *testing.T, sess *symbolize.Session) *FaultLog
	access string
	// maps: a /proc/PID/maps copy whose mappings name the instructions
	// (Symbolizer.Pid 0); "" with a session: the fault log's own mappings
	// (a perf.data's MMAP records, Pid -1); nosym: no Symbolizer at all.
	maps  string
	nosym bool
}

func ftraceLog(name string) func(*testing.T, *symbolize.Session) *FaultLog {
	return func(t *testing.T, _ *symbolize.Session) *FaultLog { return readFtraceFixture(t, name) }
}

// perfLog reads a committed perf.data as `faultline correlate` does: its
// MMAP records go to sess, with the recording's build IDs.
func perfLog(name string) func(*testing.T, *symbolize.Session) *FaultLog {
	return func(t *testing.T, sess *symbolize.Session) *FaultLog {
		t.Helper()
		r, err := perfdata.Open(filepath.Join("..", "..", "testdata", "perf", name), nil)
		if err != nil {
			t.Fatalf("committed fixture missing: %v", err)
		}
		defer r.Close()
		sess.AddBuildIDs(r.Meta().BuildIDs)
		log, err := ReadPerf(r, FaultFilter{}, sess)
		if err != nil {
			t.Fatal(err)
		}
		return log
	}
}

var goldenCases = []goldenCase{
	{name: "faults.trace+access.tt.log maps", faults: ftraceLog("faults.trace"), access: "access.tt.log", maps: "access.tt.log.maps"},
	{name: "local.faults.trace+local.access.tt.log maps", faults: ftraceLog("local.faults.trace"), access: "local.access.tt.log", maps: "local.access.tt.log.maps"},
	{name: "faults.trace+access.tt.log nosym", faults: ftraceLog("faults.trace"), access: "access.tt.log", nosym: true},
	{name: "faults.trace+access.t.log nosym", faults: ftraceLog("faults.trace"), access: "access.t.log", nosym: true},
	{name: "faults.trace+access.plain.log nosym", faults: ftraceLog("faults.trace"), access: "access.plain.log", nosym: true},
	// No access of basic.tp's is logged: every fault is unmatched and named
	// at its faulting instruction through the recording's mappings.
	{name: "perf/basic.tp.data+access.tt.log recording", faults: perfLog("basic.tp.data"), access: "access.tt.log"},
}

// correlateGolden runs one case and returns its profile.
func correlateGolden(t *testing.T, c goldenCase) *profile.Profile {
	t.Helper()
	sess, err := symbolize.NewSession(symbolize.Config{Symfs: filepath.Join("..", "..", "testdata", "symfs"),
		BuildIDDir: filepath.Join("..", "..", "testdata", "buildid-cache"), Getenv: func(string) string { return "" }}, nil)
	if c.maps != "" {
		sess, err = symbolize.NewSession(symbolize.Config{Symfs: filepath.Join("testdata", "symfs"), Getenv: func(string) string { return "" }}, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	log := c.faults(t, sess)
	res, err := Run(log, bytesSource(fixture(t, c.access)), Options{})
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	sym := &Symbolizer{Sess: sess, Pid: -1}
	switch {
	case c.nosym:
		sym = nil
	case c.maps != "":
		ms, err := symbolize.ParseProcMaps(bytes.NewReader(fixture(t, c.maps)))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.File != "[vdso]" { // as the correlate command does
				sess.Maps.Add(0, m)
			}
		}
		sym.Pid = 0
	}
	p := Profile(res, sym)
	if err := p.CheckValid(); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	var total int64
	for _, s := range p.Sample {
		total += s.Value[0]
	}
	if total != int64(len(res.Pairs)) {
		t.Errorf("%s: the profile holds %d faults, the run %d", c.name, total, len(res.Pairs))
	}
	return p
}

// goldenFile is case name's golden file: its name with every run of
// characters other than letters, digits, '.' and '-' made one '_'.
func goldenFile(name string) string {
	var b strings.Builder
	under := false
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-'
		switch {
		case ok:
			b.WriteRune(r)
			under = false
		case !under:
			b.WriteByte('_')
			under = true
		}
	}
	return filepath.Join(goldenDir, b.String()+".txt")
}

// TestProfilesGolden: correlate's profile of every committed fault and
// access log is the one in testdata/profiles, sample for sample. A change
// meant to alter these profiles rewrites the files with -update and says
// why in its commit; any other change to a profile fails here, naming the
// samples that changed.
func TestProfilesGolden(t *testing.T) {
	want := map[string]bool{}
	for _, c := range goldenCases {
		p := correlateGolden(t, c)
		path := goldenFile(c.name)
		if want[path] {
			t.Fatalf("%s: two cases share the golden file %s", c.name, path)
		}
		want[path] = true
		reporttest.CheckGolden(t, path, "# "+c.name+"\n"+reporttest.Text(p), *update,
			"go test ./attribute/correlate -run TestProfilesGolden -update")
		if c.maps == "" && !c.nosym && !hasBuildID(p) {
			// The case is there for the recording's build IDs (readelf -n
			// on the symfs binaries shows the same IDs).
			t.Errorf("%s: no mapping has a build ID: %v", c.name, p.Mapping)
		}
	}
	have, err := filepath.Glob(filepath.Join(goldenDir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range have {
		if !want[h] {
			if *update {
				if err := os.Remove(h); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("%s: no golden case makes it (-update removes it)", h)
		}
	}
}

func hasBuildID(p *profile.Profile) bool {
	for _, m := range p.Mapping {
		if m.BuildID != "" {
			return true
		}
	}
	return false
}
