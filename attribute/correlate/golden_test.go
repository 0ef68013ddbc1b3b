package correlate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
)

var update = flag.Bool("update", false, "rewrite testdata/profiles.golden from this tree's profiles")

// goldenPath holds one line per committed fault log, access log and way of
// naming instructions: the SHA-256 of Profile's uncompressed protobuf (what
// `faultline correlate -o` writes, before gzip) and the sample count and
// fault total, so that a failure says what moved.
const goldenPath = "testdata/profiles.golden"

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

// correlateGolden runs one case and describes its profile: "NAME
// sha256=HEX samples=N faults=N".
func correlateGolden(t *testing.T, c goldenCase) (string, *profile.Profile) {
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
	var raw bytes.Buffer
	if err := p.WriteUncompressed(&raw); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, s := range p.Sample {
		total += s.Value[0]
	}
	if total != int64(len(res.Pairs)) {
		t.Errorf("%s: the profile holds %d faults, the run %d", c.name, total, len(res.Pairs))
	}
	sum := sha256.Sum256(raw.Bytes())
	return fmt.Sprintf("%s sha256=%s samples=%d faults=%d", c.name, hex.EncodeToString(sum[:]), len(p.Sample), total), p
}

// TestProfilesGolden: correlate's profile of every committed fault and
// access log is byte for byte the one recorded in testdata/profiles.golden.
// A change meant to alter these profiles rewrites the file with -update and
// says why in its commit; any other change to a profile fails here.
func TestProfilesGolden(t *testing.T) {
	var got []string
	for _, c := range goldenCases {
		line, p := correlateGolden(t, c)
		got = append(got, line)
		if c.maps == "" && !c.nosym && !hasBuildID(p) {
			// The case is there for the recording's build IDs (readelf -n
			// on the symfs binaries shows the same IDs).
			t.Errorf("%s: no mapping has a build ID: %v", c.name, p.Mapping)
		}
	}
	perftest.CheckGolden(t, goldenPath, got, *update)
}

func hasBuildID(p *profile.Profile) bool {
	for _, m := range p.Mapping {
		if m.BuildID != "" {
			return true
		}
	}
	return false
}
