package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestRecordLiveEveryMemoryTrend attaches record --every 2s for 40 s to
// attachsvc (2 workers, 200k allocator calls a second, a short-lived
// thread every 2 ms) and reads record's VmRSS every 250 ms: the least RSS
// of seconds 26-40 is at most 1.25 times that of seconds 8-22. The least
// is what record holds just after a window's end hands memory back, so a
// burst (record starved of CPU on a busy machine, then reading a large
// round) does not count; memory kept per thread or per record seen does.
// testdata/record/memrun.sh measures 10 minutes.
func TestRecordLiveEveryMemoryTrend(t *testing.T) {
	requireLiveRecord(t)
	svc := startService(t, filepath.Join(buildRecordPrograms(t), "attachsvc"), "2", "200000")
	dir := filepath.Join(t.TempDir(), "windows")
	var stderr bytes.Buffer
	rec := exec.Command(buildFaultline(t), "record", "-q", "-p", strconv.Itoa(svc.cmd.Process.Pid), "--every", "2s", "--duration", "40s", "-o", dir)
	rec.Stderr = &stderr
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rec.Wait() }()
	type sample struct {
		at  time.Duration
		rss int64 // kB
	}
	var samples []sample
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick.C:
			if kb, ok := vmRSS(rec.Process.Pid); ok {
				samples = append(samples, sample{time.Since(start), kb})
			}
		}
	}
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("record: %v\n%s", err, stderr.String())
	}
	if err := svc.alive(); err != nil {
		t.Fatal(err)
	}
	least := func(from, to time.Duration) (int64, int64, int) {
		var in []int64
		for _, s := range samples {
			if s.at >= from && s.at < to {
				in = append(in, s.rss)
			}
		}
		if len(in) == 0 {
			return 0, 0, 0
		}
		slices.Sort(in)
		return in[0], in[len(in)/2], len(in)
	}
	early, earlyMed, n1 := least(8*time.Second, 22*time.Second)
	late, lateMed, n2 := least(26*time.Second, 40*time.Second)
	t.Logf("record's RSS: seconds 8-22 least %.1f MB, median %.1f MB (%d samples); seconds 26-40 least %.1f MB, median %.1f MB (%d samples)",
		float64(early)/1024, float64(earlyMed)/1024, n1, float64(late)/1024, float64(lateMed)/1024, n2)
	if n1 < 20 || n2 < 20 {
		t.Fatalf("%d and %d samples of record's RSS, want 20 or more each (record ran %v)", n1, n2, time.Since(start).Round(time.Second))
	}
	if late > early*5/4 {
		t.Errorf("record's least RSS grew from %.1f MB (seconds 8-22) to %.1f MB (seconds 26-40): more than 25%%", float64(early)/1024, float64(late)/1024)
	}
}

// vmRSS reads a process's VmRSS in kB.
func vmRSS(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.Index(b, []byte("\nVmRSS:"))
	if i < 0 {
		return 0, false
	}
	var kb int64
	if _, err := fmt.Sscan(string(b[i+len("\nVmRSS:"):]), &kb); err != nil {
		return 0, false
	}
	return kb, true
}
