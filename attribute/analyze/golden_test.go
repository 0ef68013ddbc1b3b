package analyze

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/perfdata/perftest"
)

var update = flag.Bool("update", false, "rewrite testdata/profiles.golden from this tree's profiles")

// goldenPath holds one line per committed recording and mode: the SHA-256
// of the profile's uncompressed protobuf (what analyze writes, before gzip,
// so that a new Go release's deflate does not count as a change; it equals
// `faultline analyze [--by touch] --symfs DIR --buildid-dir testdata/buildid-cache
// -o p.pb.gz REC && zcat p.pb.gz | sha256sum`) and the sample count and
// per-type totals, so that a failure says what moved.
const goldenPath = "testdata/profiles.golden"

// committedRecordings lists every recording under testdata that analyze
// turns into a profile (testdata/crafted holds hostile inputs that end in
// errors; the bounds tests cover them).
func committedRecordings(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, g := range []string{"../../testdata/perf/*.data", "../../testdata/mixed/*.data", "../../testdata/diff/*.data",
		"../../testdata/heapgrow/*.data", "../../testdata/leaf/*.data"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 27 {
		t.Fatalf("found %d committed recordings, want the 27 under testdata/{perf,mixed,diff,heapgrow,leaf}", len(files))
	}
	return files
}

type serialKey struct {
	path string
	mode report.Mode
}

type serialResult struct {
	profile []byte // gzipped, as written
	summary string
}

// serialRuns memoizes the one-walker analysis that both
// TestWorkersSameProfile and TestProfilesGolden take as the reference.
var serialRuns sync.Map // serialKey -> serialResult

func serialRun(t *testing.T, path string, mode report.Mode) ([]byte, string) {
	t.Helper()
	k := serialKey{path, mode}
	if v, ok := serialRuns.Load(k); ok {
		r := v.(serialResult)
		return r.profile, r.summary
	}
	p, s := runWorkers(t, path, mode, 1)
	serialRuns.Store(k, serialResult{p, s})
	return p, s
}

// goldenLine describes one profile: "RECORDING by-alloc|by-touch
// sha256=HEX samples=N TYPE=TOTAL...".
func goldenLine(t *testing.T, rel string, mode report.Mode, gz []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	p := reporttest.Parse(t, fmt.Sprintf("%s %v", rel, mode), gz)
	totals := make([]int64, len(p.SampleType))
	for _, s := range p.Sample {
		for i, v := range s.Value {
			totals[i] += v
		}
	}
	by := "by-alloc"
	if mode == report.ByTouch {
		by = "by-touch"
	}
	sum := sha256.Sum256(raw)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s sha256=%s samples=%d", rel, by, hex.EncodeToString(sum[:]), len(p.Sample))
	for i, st := range p.SampleType {
		fmt.Fprintf(&b, " %s=%d", st.Type, totals[i])
	}
	return b.String()
}

// TestProfilesGolden: the profile of every committed recording, by alloc
// and by touch, is byte for byte the one recorded in testdata/profiles.golden.
// A change meant to alter profiles rewrites the file with -update and says
// why in its commit; any other change to a profile fails here.
func TestProfilesGolden(t *testing.T) {
	var got []string
	for _, f := range committedRecordings(t) {
		rel := strings.TrimPrefix(filepath.ToSlash(f), "../../")
		for _, mode := range []report.Mode{report.ByAlloc, report.ByTouch} {
			gz, _ := serialRun(t, f, mode)
			got = append(got, goldenLine(t, rel, mode, gz))
		}
	}
	perftest.CheckGolden(t, goldenPath, got, *update)
}
