package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// perfStats reads per-event SAMPLE and LOST_SAMPLES counts from the
// `perf report --stats` text gen-mixed.sh saved next to a recording of
// testdata/mixed: range-first.data lost nothing; lossy.data lost most
// samples of every event (a 2-page ring).
func perfStats(t *testing.T, name string) map[string][2]uint64 {
	t.Helper()
	data := perftest.ReadTestdata(t, "mixed", name+".stats.txt")
	out := map[string][2]uint64{}
	ev := ""
	for _, line := range strings.Split(string(data), "\n") {
		if n, ok := strings.CutSuffix(line, " stats:"); ok && n != "Aggregated" {
			ev = n
			continue
		}
		f := strings.Fields(line)
		if ev == "" || len(f) < 3 || f[1] != "events:" {
			continue
		}
		n, _ := strconv.ParseUint(f[2], 10, 64)
		v := out[ev]
		switch f[0] {
		case "SAMPLE":
			v[0] = n
		case "LOST_SAMPLES":
			v[1] = n
		}
		out[ev] = v
	}
	return out
}

// TestDiffLoss: diff warns in every format when an input lost allocation
// or fault samples, with perf report --stats' numbers, and --max-loss P
// exits 2 exactly when some event lost more than P percent.
func TestDiffLoss(t *testing.T) {
	dir := t.TempDir()
	prof := func(name string) string {
		out := filepath.Join(dir, name+".pb.gz")
		code, stdout, stderr := runCLI("analyze", "-q", "--symfs", perftest.Testdata(t, "symfs"), "-o", out, perftest.Testdata(t, "mixed", name+".data"))
		if code != ExitOK {
			t.Fatalf("analyze %s: exit %d\n%s%s", name, code, stdout, stderr)
		}
		return out
	}
	clean, lossy := prof("range-first"), prof("lossy")
	stats := perfStats(t, "lossy")
	if len(stats) != 3 {
		t.Fatalf("lossy.stats.txt: %d events, want 3", len(stats))
	}
	worst := 0.0
	var want []string
	for ev, v := range stats {
		pct := 100 * float64(v[1]) / float64(v[0]+v[1])
		worst = max(worst, pct)
		want = append(want, fmt.Sprintf("NEW lost %d of %d %s samples (%.1f%%", v[1], v[0]+v[1], ev, pct))
	}

	// --min-delta keeps regressions (exit 1) out of the way: the lossy
	// recording has other sites.
	code, stdout, stderr := runCLI("diff", "--min-delta", "1000000", clean, lossy)
	if code != ExitOK {
		t.Fatalf("diff without --max-loss: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stdout, "warning: "+w) {
			t.Errorf("text output lacks %q:\n%s", "warning: "+w, stdout)
		}
	}
	_, md, _ := runCLI("diff", "--min-delta", "1000000", "--format", "markdown", clean, lossy)
	for _, w := range want {
		if !strings.Contains(md, "**Warning:** "+w) {
			t.Errorf("markdown lacks %q:\n%s", w, md)
		}
	}
	_, js, _ := runCLI("diff", "--min-delta", "1000000", "--format", "json", clean, lossy)
	var j struct {
		Losses []struct {
			Input, Event  string
			Samples, Lost uint64
		}
	}
	if err := json.Unmarshal([]byte(js), &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Losses) != 3 {
		t.Errorf("json losses %+v, want 3", j.Losses)
	}
	for _, l := range j.Losses {
		if s := stats[l.Event]; l.Input != "NEW" || l.Samples != s[0] || l.Lost != s[1] {
			t.Errorf("json loss %+v, perf report --stats: %d samples, %d lost", l, s[0], s[1])
		}
	}

	below, above := strconv.Itoa(int(math.Floor(worst))), strconv.Itoa(int(math.Ceil(worst)))
	if code, _, stderr := runCLI("diff", "--min-delta", "1000000", "--max-loss", below, clean, lossy); code != ExitFailure || !strings.Contains(stderr, "--max-loss") {
		t.Errorf("--max-loss %s (worst event lost %.2f%%): exit %d, want 2; stderr %q", below, worst, code, stderr)
	}
	if code, _, _ := runCLI("diff", "--min-delta", "1000000", "--max-loss", above, clean, lossy); code != ExitOK {
		t.Errorf("--max-loss %s (worst event lost %.2f%%): exit %d, want 0", above, worst, code)
	}
	// Either side counts; a lossless pair passes --max-loss 0 silently.
	if code, _, _ := runCLI("diff", "--min-delta", "1000000", "--max-loss", below, lossy, clean); code != ExitFailure {
		t.Errorf("lossy BASE, --max-loss %s: exit %d, want 2", below, code)
	}
	code, stdout, _ = runCLI("diff", "--min-delta", "1000000", "--max-loss", "0", clean, clean)
	if code != ExitOK || strings.Contains(stdout, "warning") {
		t.Errorf("lossless inputs, --max-loss 0: exit %d, output\n%s", code, stdout)
	}
	if code, _, _ := runCLI("diff", "--min-delta", "1000000", "--max-loss", "-1", clean, clean); code != ExitFailure {
		t.Errorf("--max-loss -1: exit %d, want 2 (usage)", code)
	}
}

// TestLossAgreesAcrossCommands: `faultline info`, the analyze summary and
// the profile's loss comments give each event perf report --stats' LOST_SAMPLES
// count (LOST records, the same losses per ring buffer, are not added).
func TestLossAgreesAcrossCommands(t *testing.T) {
	stats := perfStats(t, "lossy")
	data := perftest.Testdata(t, "mixed", "lossy.data")
	code, stdout, stderr := runCLI("info", "--json", data)
	if code != ExitOK {
		t.Fatalf("info: exit %d\n%s", code, stderr)
	}
	var info struct {
		Events []struct {
			Name          string
			Samples, Lost uint64
		}
	}
	if err := json.Unmarshal([]byte(stdout), &info); err != nil {
		t.Fatal(err)
	}
	for _, e := range info.Events {
		if s := stats[e.Name]; e.Samples != s[0] || e.Lost != s[1] {
			t.Errorf("info: %s %d samples %d lost; perf report --stats: %d, %d", e.Name, e.Samples, e.Lost, s[0], s[1])
		}
	}
	out := filepath.Join(t.TempDir(), "p.pb.gz")
	code, stdout, stderr = runCLI("analyze", "--symfs", perftest.Testdata(t, "symfs"), "-o", out, data)
	if code != ExitOK {
		t.Fatalf("analyze: exit %d\n%s", code, stderr)
	}
	for ev, s := range stats {
		w := fmt.Sprintf("%s %d of %d (", ev, s[1], s[0]+s[1])
		if !strings.Contains(stdout, w) {
			t.Errorf("analyze summary lacks %q:\n%s", w, stdout)
		}
	}
}
