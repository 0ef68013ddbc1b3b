package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report/reporttest"
)

// TestDiffUnitsAndSampleTypes: BASE and NEW that measure faults in
// different units are refused; BASE and NEW with different sample-type sets
// still get their comparison, and -o writes a diff profile of the types
// they share.
func TestDiffUnitsAndSampleTypes(t *testing.T) {
	dir := t.TempDir()
	base, head := synthPair(t, dir)
	hp := reporttest.Read(t, head)

	bytesHead := filepath.Join(dir, "bytes.pb.gz")
	hb := hp.Copy()
	hb.SampleType[0].Unit = "bytes"
	reporttest.Write(t, bytesHead, hb)
	code, _, stderr := runCLI("diff", base, bytesHead)
	if code != ExitFailure || !strings.Contains(stderr, `BASE measures faults in "count", NEW in "bytes"`) {
		t.Errorf("faults/count vs faults/bytes: exit %d, %q", code, stderr)
	}

	// NEW without alloc_space.
	fewer := filepath.Join(dir, "fewer.pb.gz")
	hf := hp.Copy()
	hf.SampleType = hf.SampleType[:2]
	for _, s := range hf.Sample {
		s.Value = s.Value[:2]
	}
	reporttest.Write(t, fewer, hf)
	out := filepath.Join(dir, "d.pb.gz")
	code, stdout, stderr := runCLI("diff", "-o", out, base, fewer)
	if code != ExitRegression || !strings.Contains(stdout, "REGRESSION") || strings.Contains(stderr, "0x") {
		t.Errorf("different sample types: exit %d\n%s\n%s", code, stdout, stderr)
	}
	d := reporttest.Read(t, out)
	if len(d.SampleType) != 2 || d.SampleType[0].Type != "faults" || d.SampleType[1].Type != "allocs" {
		t.Errorf("diff profile types %v, want faults and allocs", d.SampleType)
	}
	// NEW's total minus BASE's (the scenario above diff_test.go's
	// synthPair): 219 − 204 = 15 faults.
	var total int64
	for _, s := range d.Sample {
		total += s.Value[0]
	}
	if total != 15 {
		t.Errorf("diff profile sums to %d faults, want 219 − 204 = 15", total)
	}
}
