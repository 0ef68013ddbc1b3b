package cli

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report/reporttest"
)

// topSiteFaults analyzes data and returns the faults of its top allocation
// site (leaf location of the attributed samples).
func topSiteFaults(t *testing.T, data string) int64 {
	t.Helper()
	prof := data + ".pb.gz"
	var stdout, stderr bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
	if code := Main([]string{"analyze", "-q", "-o", prof, data}, env); code != ExitOK {
		t.Fatalf("analyze %s: exit %d\n%s", data, code, stderr.String())
	}
	sites := map[uint64]int64{}
	var top int64
	for _, s := range reporttest.Read(t, prof).Sample {
		if len(s.Label["class"]) > 0 || len(s.Location) == 0 {
			continue // unattributed
		}
		id := s.Location[0].ID
		sites[id] += s.Value[0]
		top = max(top, sites[id])
	}
	return top
}

// TestRecordLiveCutShort checks what a recording cut short attributes:
// testdata/record/src/rounds.c faults 256 pages of one allocation site in
// each of 200 rounds, evenly over the run, so the whole recording's top
// site has at least 200 × 256 = 51200 faults, and a copy cut at 50% (90%)
// of its data section (the file header's data offset and size: what
// comes after the section, the feature sections, is a fixed cost) must
// still attribute at least 45% (85%) of that.
func TestRecordLiveCutShort(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "rounds.data")
	if code, stderr := runRecordMain("-q", "-o", data, "--", filepath.Join(progs, "rounds"), "200"); code != ExitOK {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	full, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) < 56 {
		t.Fatalf("%s: %d bytes, shorter than a perf.data header", data, len(full))
	}
	dataOff, dataSize := int64(binary.LittleEndian.Uint64(full[40:])), int64(binary.LittleEndian.Uint64(full[48:]))
	if dataOff+dataSize > int64(len(full)) {
		t.Fatalf("%s: data section %d+%d past the file's %d bytes", data, dataOff, dataSize, len(full))
	}
	whole := topSiteFaults(t, data)
	if whole < 200*256 {
		t.Fatalf("whole recording: top site has %d faults, want at least 200 × 256 = 51200", whole)
	}
	for _, c := range []struct{ cut, want int64 }{{50, 45}, {90, 85}} {
		cut := filepath.Join(dir, "cut.data")
		if err := os.WriteFile(cut, full[:dataOff+dataSize*c.cut/100], 0o600); err != nil {
			t.Fatal(err)
		}
		got := topSiteFaults(t, cut)
		t.Logf("cut at %d%%: top site %d of %d faults (%.1f%%)", c.cut, got, whole, 100*float64(got)/float64(whole))
		if got*100 < whole*c.want {
			t.Errorf("cut at %d%%: top site has %d faults, want at least %d%% of the whole file's %d", c.cut, got, c.want, whole)
		}
	}
}
