package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/faultline/faultline/attribute/report/reporttest"
)

// TestRecordAnalyzeSortLive is the acceptance test of record and analyze
// together: `faultline record -- sort FILE -o /dev/null`, then `faultline
// analyze`. GNU sort reads its input into one buffer it mallocs up front
// (hundreds of MiB for a few MiB of input: it sizes it for the worst case
// and touches only what it uses), so most of sort's page faults must be
// attributed to that buffer's allocation site. The buffer's size comes from
// perf script (the largest size= of a faultline:malloc sample), independent
// of faultline's decoder.
func TestRecordAnalyzeSortLive(t *testing.T) {
	requireLiveRecord(t)
	if _, err := exec.LookPath("sort"); err != nil {
		t.Skip("no sort in PATH")
	}
	dir := t.TempDir()
	input := filepath.Join(dir, "big.txt")
	var b strings.Builder
	for i := range 100000 { // 3.4 MB
		fmt.Fprintf(&b, "%08d line %6d of the input\n", (i*7919)%100000, i)
	}
	if err := os.WriteFile(input, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "sort.data")
	start := time.Now()
	var stdout, stderr bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
	if code := Main([]string{"record", "-q", "-o", data, "--", "sort", input, "-o", "/dev/null"}, env); code != ExitOK {
		t.Fatalf("record: exit %d\n%s", code, stderr.String())
	}
	t.Logf("record took %v:\n%s", time.Since(start).Round(time.Millisecond), stderr.String())

	prof := filepath.Join(dir, "sort.pb.gz")
	stdout.Reset()
	stderr.Reset()
	start = time.Now()
	if code := Main([]string{"analyze", "-o", prof, data}, env); code != ExitOK {
		t.Fatalf("analyze: exit %d\n%s", code, stderr.String())
	}
	t.Logf("analyze took %v:\n%s", time.Since(start).Round(time.Millisecond), stdout.String())
	if !strings.Contains(stdout.String(), "Top allocation sites by faults:") {
		t.Errorf("no site table in the summary")
	}

	// Reference: the largest malloc request, from perf script.
	perf := requirePerf(t)
	script, err := exec.Command(perf, "script", "-i", data, "-F", "event,trace").Output()
	if err != nil {
		t.Fatalf("perf script: %v", err)
	}
	var bufSize int64
	sizeRE := regexp.MustCompile(`faultline_\d+:malloc:.*\bsize=(\d+)`)
	for _, m := range sizeRE.FindAllStringSubmatch(string(script), -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		bufSize = max(bufSize, n)
	}
	if bufSize < int64(b.Len()) {
		t.Fatalf("perf script: largest malloc is %d bytes, smaller than the input (%d): not sort's buffer?", bufSize, b.Len())
	}

	// Per allocation site (leaf location of a by-alloc sample): faults,
	// allocations, bytes.
	p := reporttest.Read(t, prof)
	type site struct{ faults, allocs, bytes int64 }
	sites := map[uint64]*site{}
	var total int64
	for _, s := range p.Sample {
		total += s.Value[0]
		if len(s.Label["class"]) > 0 || len(s.Location) == 0 {
			continue // unattributed
		}
		id := s.Location[0].ID
		if sites[id] == nil {
			sites[id] = &site{}
		}
		sites[id].faults += s.Value[0]
		sites[id].allocs += s.Value[1]
		sites[id].bytes += s.Value[2]
	}
	var top *site
	for _, s := range sites {
		if top == nil || s.faults > top.faults {
			top = s
		}
	}
	if top == nil || total == 0 {
		t.Fatalf("no attributed faults (%d faults)", total)
	}
	t.Logf("faults %d; top site %d faults (%.1f%%), %d allocation(s) of %d bytes; perf script's largest malloc %d bytes",
		total, top.faults, 100*float64(top.faults)/float64(total), top.allocs, top.bytes, bufSize)
	if top.allocs != 1 || top.bytes != bufSize {
		t.Errorf("top site: %d allocations, %d bytes; want sort's buffer, 1 allocation of %d bytes", top.allocs, top.bytes, bufSize)
	}
	// On this 2-core VM about 95% (the rest: loader, libc, locale files).
	if top.faults*10 < total*8 {
		t.Errorf("buffer site has %d of %d faults, want at least 80%%", top.faults, total)
	}
}
