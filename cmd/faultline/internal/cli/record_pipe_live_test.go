package cli

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
)

// TestRecordLivePipeToAnalyze is issue 22's item 3, live: `record -o - |
// analyze -` (both in process, joined by a pipe, analyze reading while
// record writes) gives the very profile (byte for byte) that analyzing the
// same recording as a file gives. The recording is pipe mode, compressed by
// default; perf script reads it from standard input and counts the samples
// faultline's reader counts.
func TestRecordLivePipeToAnalyze(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	dir := t.TempDir()
	fromStream, fromFile := filepath.Join(dir, "stream.pb.gz"), filepath.Join(dir, "file.pb.gz")
	pr, pw := io.Pipe()
	var rec, stderr, analyzeErr bytes.Buffer
	analyzed := make(chan int)
	go func() {
		code := Main([]string{"analyze", "-q", "-", "-o", fromStream}, &Env{Stdin: pr, Stdout: io.Discard, Stderr: &analyzeErr})
		io.Copy(io.Discard, pr) // let record finish if analyze stopped early
		analyzed <- code
	}()
	code := Main([]string{"record", "-q", "-o", "-", "--", filepath.Join(progs, "churn"), "20000"},
		&Env{Stdin: strings.NewReader(""), Stdout: io.MultiWriter(pw, &rec), Stderr: &stderr})
	pw.Close()
	if code != ExitOK {
		t.Fatalf("record -o -: exit %d: %s", code, stderr.String())
	}
	if code := <-analyzed; code != ExitOK {
		t.Fatalf("analyze -: exit %d: %s", code, analyzeErr.String())
	}
	if !bytes.HasPrefix(rec.Bytes(), []byte("PERFILE2\x10\x00\x00\x00\x00\x00\x00\x00")) {
		t.Fatalf("record -o - did not write a pipe-mode header: % x", rec.Bytes()[:min(16, rec.Len())])
	}
	piped := filepath.Join(dir, "piped.data")
	if err := os.WriteFile(piped, rec.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	if code, _, errs := runCLI("analyze", "-q", piped, "-o", fromFile); code != ExitOK {
		t.Fatalf("analyze %s: exit %d: %s", piped, code, errs)
	}
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
	// One line per sample; perf script 6.1 also prints the stack
	// samples' callchains in a recording with the memory-map calls'
	// tracepoints: tab-indented lines, a blank line after each chain.
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && !strings.HasPrefix(line, "\t") {
			n++
		}
	}
	if n != samples {
		t.Errorf("perf script -i - printed %d samples, faultline's reader read %d", n, samples)
	}
}
