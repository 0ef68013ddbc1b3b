package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
)

// TestRecordLivePipeToAnalyze is issue 22's item 3, live: `record -o -`
// streams a pipe-mode recording, compressed by default, that `analyze -`
// reads from standard input into the very profile (byte for byte) that
// analyzing the same bytes as a file gives; perf script reads it from
// standard input and counts the samples faultline's reader counts.
func TestRecordLivePipeToAnalyze(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	dir := t.TempDir()
	var rec, stderr bytes.Buffer
	code := Main([]string{"record", "-q", "-o", "-", "--", filepath.Join(progs, "churn"), "20000"},
		&Env{Stdin: strings.NewReader(""), Stdout: &rec, Stderr: &stderr})
	if code != ExitOK {
		t.Fatalf("record -o -: exit %d: %s", code, stderr.String())
	}
	if !bytes.HasPrefix(rec.Bytes(), []byte("PERFILE2\x10\x00\x00\x00\x00\x00\x00\x00")) {
		t.Fatalf("record -o - did not write a pipe-mode header: % x", rec.Bytes()[:min(16, rec.Len())])
	}
	piped := filepath.Join(dir, "piped.data")
	if err := os.WriteFile(piped, rec.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	analyze := func(stdin []byte, args ...string) {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Main(append([]string{"analyze", "-q"}, args...), &Env{Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errb}); code != ExitOK {
			t.Fatalf("analyze %v: exit %d: %s", args, code, errb.String())
		}
	}
	fromStream, fromFile := filepath.Join(dir, "stream.pb.gz"), filepath.Join(dir, "file.pb.gz")
	analyze(rec.Bytes(), "-", "-o", fromStream)
	analyze(nil, piped, "-o", fromFile)
	a, errA := os.ReadFile(fromStream)
	b, errB := os.ReadFile(fromFile)
	if errA != nil || errB != nil || len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("analyze - and analyze FILE differ on one recording (%d and %d bytes; %v %v)", len(a), len(b), errA, errB)
	}

	rd, err := perfdata.NewStream(bytes.NewReader(rec.Bytes()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	samples := 0
	for rd.Next() {
		if _, ok := rd.Record().(*perfdata.Sample); ok {
			samples++
		}
	}
	if rd.Err() != nil || !rd.Meta().PipeMode || rd.Meta().Compression.Type != perfdata.CompressZstd || rd.Stats().Compressed == 0 || samples == 0 {
		t.Fatalf("read back: %v, pipe mode %v, compression %+v, %d samples", rd.Err(), rd.Meta().PipeMode, rd.Meta().Compression, samples)
	}
	if len(rd.Meta().BuildIDs) == 0 {
		t.Errorf("no build ids after the data")
	}

	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Log("no perf in PATH: perf script's reading not checked")
		return
	}
	c := exec.Command(perf, "script", "-F", "event", "-i", "-")
	c.Stdin = bytes.NewReader(rec.Bytes())
	out, err := c.Output()
	if err != nil {
		t.Fatalf("perf script -i -: %v", err)
	}
	if n := strings.Count(string(out), "\n"); n != samples {
		t.Errorf("perf script -i - printed %d samples, faultline's reader read %d", n, samples)
	}
}
