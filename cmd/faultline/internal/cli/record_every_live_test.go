package cli

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/cmd/faultline/internal/pyroscope/pyroscopetest"
	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"
)

// serviceCount is one line of the service's own count: CLOCK_MONOTONIC
// ns and the malloc calls made by then.
type serviceCount struct{ t, allocs int64 }

// serviceCounts parses the service's lines (testdata/record/src/service.c).
func serviceCounts(t *testing.T, lines []string) []serviceCount {
	t.Helper()
	re := regexp.MustCompile(`^t=(\d+) pid=\d+ allocs=(\d+) `)
	var out []serviceCount
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("service line %q", l)
		}
		ts, _ := strconv.ParseInt(m[1], 10, 64)
		n, _ := strconv.ParseInt(m[2], 10, 64)
		out = append(out, serviceCount{ts, n})
	}
	return out
}

// countAt is the service's count at time ts, interpolated between the
// lines around it.
func countAt(counts []serviceCount, ts int64) float64 {
	i := sort.Search(len(counts), func(i int) bool { return counts[i].t >= ts })
	switch {
	case i == 0:
		return float64(counts[0].allocs)
	case i == len(counts):
		return float64(counts[len(counts)-1].allocs)
	}
	a, b := counts[i-1], counts[i]
	return float64(a.allocs) + float64(b.allocs-a.allocs)*float64(ts-a.t)/float64(b.t-a.t)
}

// countBounds is the least and the most calls the service can have made
// in [from, to] by its lines: from the last line before from or the
// first after it, to the first line after to or the last before it.
func countBounds(counts []serviceCount, from, to int64) (lo, hi int64) {
	at := func(ts int64) (before, after int64) {
		i := sort.Search(len(counts), func(i int) bool { return counts[i].t >= ts })
		before, after = counts[max(i-1, 0)].allocs, counts[min(i, len(counts)-1)].allocs
		return before, after
	}
	fromBefore, fromAfter := at(from)
	toBefore, toAfter := at(to)
	return toBefore - fromAfter, toAfter - fromBefore
}

// lineGap is the time between the service's lines around ts.
func lineGap(counts []serviceCount, ts int64) time.Duration {
	i := sort.Search(len(counts), func(i int) bool { return counts[i].t >= ts })
	if i == 0 || i == len(counts) {
		return -1
	}
	return time.Duration(counts[i].t - counts[i-1].t)
}

// startCountingService runs the service on the host with the given arguments,
// its lines kept.
func startCountingService(t *testing.T, args ...string) (*exec.Cmd, *lineLog) {
	t.Helper()
	cmd := exec.Command(filepath.Join(buildRecordPrograms(t), "service"), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	l := logLines(out)
	l.waitFirst(t, 10*time.Second)
	return cmd, l
}

// windowProfiles reads the profiles of dir in name order.
func windowProfiles(t *testing.T, dir string) ([]string, []*profile.Profile) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var ps []*profile.Profile
	for _, n := range names {
		raw, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		p := reporttest.Parse(t, n, raw)
		if err := p.CheckValid(); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		ps = append(ps, p)
	}
	return names, ps
}

// siteTotal sums a sample type over the samples whose leaf function is fn
// (every sample when fn is "").
func siteTotal(p *profile.Profile, typ, fn string) int64 {
	vi := report.ValueIndex(p, typ)
	if vi < 0 {
		return 0
	}
	var n int64
	for _, s := range p.Sample {
		if fn != "" && (len(s.Location) == 0 || len(s.Location[0].Line) == 0 || s.Location[0].Line[0].Function.Name != fn) {
			continue
		}
		n += s.Value[vi]
	}
	return n
}

// TestRecordLiveEvery records the service (testdata/record/src/service.c,
// 2 threads, 20000 malloc calls a second, its own count printed every
// millisecond) with -p --every 1s --duration 10s: ten profiles named by
// number and start time; each window's allocations equal the service's
// own count over the window's span (interpolated between its lines)
// within 1%; each alloc_big call (256 KiB, mmap'd: 64 pages and the
// chunk header's) takes 65 faults; the ring of 4096-byte blocks (2
// threads x 256 of 4112-byte chunks) is resident at every window's end.
// Both ways of -p: in-process and uprobes.
func TestRecordLiveEvery(t *testing.T) {
	requireLiveRecord(t)
	for _, way := range pidAttachWays {
		t.Run(way, func(t *testing.T) { testRecordLiveEvery(t, way) })
	}
}

// recordCountingWindows records the counting service (2 threads, rate
// malloc calls a second) with -p --attach way --every 1s for n seconds,
// and returns its counts, the realtime clock less the monotonic one (a
// profile's time less it is the recording's clock), and the n window
// profiles with their files' names.
func recordCountingWindows(t *testing.T, way, rate string, n int) ([]serviceCount, int64, []string, []*profile.Profile) {
	t.Helper()
	cmd, lines := startCountingService(t, "2", rate, "1")
	dir := filepath.Join(t.TempDir(), "windows")
	code, stderr := runRecordMain("-q", "-p", strconv.Itoa(cmd.Process.Pid), "--attach", way, "--every", "1s", "--duration", strconv.Itoa(n)+"s", "-o", dir)
	if code != ExitOK || stderr != "" {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	checkAttachedWay(t, cmd.Process.Pid, way)
	var mono, real unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	unix.ClockGettime(unix.CLOCK_REALTIME, &real)
	wall := real.Nano() - mono.Nano()
	time.Sleep(10 * time.Millisecond) // the service's lines past the end
	counts := serviceCounts(t, lines.Lines())
	names, ps := windowProfiles(t, dir)
	if len(ps) != n {
		t.Fatalf("%d profiles, want %d: %v", len(ps), n, names)
	}
	return counts, wall, names, ps
}

func testRecordLiveEvery(t *testing.T, way string) {
	counts, wall, names, ps := recordCountingWindows(t, way, "20000", 10)
	nameRe := regexp.MustCompile(`^(\d{6})-(\d{8}T\d{6}\.\d{3}Z)\.pb\.gz$`)
	ring := float64(2 * 256 * 4112)
	var allBig, allBigFaults int64
	for i, p := range ps {
		m := nameRe.FindStringSubmatch(filepath.Base(names[i]))
		start := time.Unix(0, p.TimeNanos).UTC().Format("20060102T150405.000Z")
		if m == nil || m[1] != strconv.Itoa(1000001 + i)[1:] || m[2] != start {
			t.Errorf("profile %d named %s, want %06d-%s.pb.gz", i, filepath.Base(names[i]), i+1, start)
		}
		if p.DurationNanos != int64(time.Second) {
			t.Errorf("window %d lasts %v, want 1s", i+1, time.Duration(p.DurationNanos))
		}
		from := p.TimeNanos - wall
		want := countAt(counts, from+p.DurationNanos) - countAt(counts, from)
		got := siteTotal(p, report.SampleAllocs, "")
		big, bigFaults := siteTotal(p, report.SampleAllocs, "alloc_big"), siteTotal(p, report.SampleFaults, "alloc_big")
		res := float64(siteTotal(p, report.SampleResidentEnd, "alloc_page"))
		t.Logf("window %d: %d allocations, the service counted %.0f (%+.2f%%; its lines around the ends %v and %v apart); alloc_big %d calls, %d faults; alloc_page resident %.0f bytes",
			i+1, got, want, 100*(float64(got)-want)/want, lineGap(counts, from), lineGap(counts, from+p.DurationNanos), big, bigFaults, res)
		// Its count over the window lies between what its lines
		// inside the window and those just outside it say: the same
		// number, but for a loaded machine's late lines.
		lo, hi := countBounds(counts, from, from+p.DurationNanos)
		if float64(got) < float64(lo)-0.01*want || float64(got) > float64(hi)+0.01*want {
			t.Errorf("window %d: %d allocations, the service counted %.0f (between %d and %d from its lines around the ends)", i+1, got, want, lo, hi)
		}
		// A call near a window's end takes some of its faults in the
		// next: one such call per thread at each end.
		if big == 0 || abs(bigFaults-65*big) > 2*2*65 {
			t.Errorf("window %d: alloc_big %d calls with %d faults, want 65 each (give or take the 2 threads' calls at its ends)", i+1, big, bigFaults)
		}
		allBig += big
		allBigFaults += bigFaults
		// The ring's pages resident before the recording and never
		// faulted since belong to the site the first page-table read
		// found them in; the rest are alloc_page's.
		if res < 0.8*ring || res > 1.05*ring {
			t.Errorf("window %d: alloc_page holds %.0f bytes resident at its end, want about %.0f", i+1, res, ring)
		}
	}
	if abs(allBigFaults-65*allBig) > 2*65 {
		t.Errorf("alloc_big: %d calls with %d faults in all windows, want 65 each (give or take the 2 threads' calls at the end)", allBig, allBigFaults)
	}
}

func abs(n int64) int64 { return max(n, -n) }

// pidAttachWays are -p's ways to reach a process, for the tests that
// cover each: in-process (the default) and uprobes.
var pidAttachWays = []string{attachInject, attachUprobe}

// checkAttachedWay checks, after record -p --attach way, that process
// pid was recorded that way: an attach leaves the shim loaded in it,
// dormant (its maps name it); uprobes load nothing.
func checkAttachedWay(t *testing.T, pid int, way string) {
	t.Helper()
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	if loaded := bytes.Contains(maps, []byte("libfaultline-shim")); loaded != (way == attachInject) {
		t.Errorf("--attach %s: the shim loaded in process %d: %v", way, pid, loaded)
	}
}

// TestRecordLiveEveryPush pushes each window of a 3-second -p --every 1s
// run to the in-process Pyroscope push server: three pushes, each the
// bytes of the profile written into the folder beside, with the labels
// given and the service's name.
func TestRecordLiveEveryPush(t *testing.T) {
	requireLiveRecord(t)
	srv := pyroscopetest.Start(t)
	cmd, _ := startCountingService(t, "2", "5000", "100")
	dir := filepath.Join(t.TempDir(), "windows")
	code, stderr := runRecordMain("-q", "-p", strconv.Itoa(cmd.Process.Pid), "--every", "1s", "--duration", "3s",
		"-o", dir, "--push", srv.URL, "--push-label", "env=test")
	if code != ExitOK || stderr != "" {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	checkAttachedWay(t, cmd.Process.Pid, attachInject)
	names, ps := windowProfiles(t, dir)
	reqs := srv.Requests()
	if len(ps) != 3 || len(reqs) != 3 {
		t.Fatalf("%d profiles, %d pushes; want 3 of each", len(ps), len(reqs))
	}
	for i, req := range reqs {
		if got, want := pyroscopetest.Labels(req.Series[0]), "__name__=faultline,env=test,service_name=service"; got != want {
			t.Errorf("push %d: labels %s, want %s", i, got, want)
		}
		raw, err := os.ReadFile(names[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(req.Series[0].Samples[0].RawProfile, raw) {
			t.Errorf("push %d is not the bytes of %s", i, filepath.Base(names[i]))
		}
		if siteTotal(ps[i], report.SampleAllocs, "") == 0 {
			t.Errorf("window %d has no allocations", i+1)
		}
	}
	if !strings.HasPrefix(filepath.Base(names[0]), "000001-") {
		t.Errorf("first profile %s", names[0])
	}
}

// TestRecordLivePidExits: the -p process exiting ends the recording, with
// the windows up to its exit and a line saying how to follow a restart;
// both ways of -p.
func TestRecordLivePidExits(t *testing.T) {
	requireLiveRecord(t)
	for _, way := range pidAttachWays {
		t.Run(way, func(t *testing.T) { testRecordLivePidExits(t, way) })
	}
}

func testRecordLivePidExits(t *testing.T, way string) {
	cmd, _ := startCountingService(t, "1", "2000", "100")
	go func() {
		time.Sleep(2500 * time.Millisecond)
		cmd.Process.Kill()
	}()
	dir := filepath.Join(t.TempDir(), "windows")
	start := time.Now()
	code, stderr := runRecordMain("-p", strconv.Itoa(cmd.Process.Pid), "--attach", way, "--every", "1s", "-o", dir)
	if code != ExitOK {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	if inproc := strings.Contains(stderr, "in-process:"); inproc != (way == attachInject) || strings.Contains(stderr, "cannot attach") {
		t.Errorf("--attach %s: record's log:\n%s", way, stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("record ran %v after the process exited at 2.5 s", d)
	}
	if want := "exited, which ended the recording"; !strings.Contains(stderr, want) {
		t.Errorf("record did not say %q:\n%s", want, stderr)
	}
	if _, ps := windowProfiles(t, dir); len(ps) == 0 {
		t.Error("no window written before the exit")
	}
}

// TestRecordLiveEveryCommand: --every with a command (in-process) and
// --duration 2500ms: three profiles, 1 s, 1 s and the last up to 500 ms
// (the windows start at the recording's first record, the duration when
// the command is released); the service's standard output stays its own;
// the first two windows' allocations equal the service's own count at
// their end within 1% (the service started in the first; the last window
// ends as record stops the service, whose last line can precede its last
// calls).
func TestRecordLiveEveryCommand(t *testing.T) {
	progs := requireInproc(t)
	dir := filepath.Join(t.TempDir(), "windows")
	var stdout, stderr bytes.Buffer
	code := Main([]string{"record", "-q", "--every", "1s", "--duration", "2500ms", "-o", dir, "--",
		filepath.Join(progs, "service"), "2", "20000", "1"}, &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr})
	if code != ExitOK || stderr.Len() > 0 {
		t.Fatalf("record: exit %d\n%s", code, stderr.String())
	}
	var mono, real unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	unix.ClockGettime(unix.CLOCK_REALTIME, &real)
	wall := real.Nano() - mono.Nano()
	counts := serviceCounts(t, strings.Split(strings.TrimSpace(stdout.String()), "\n"))
	_, ps := windowProfiles(t, dir)
	if len(ps) != 3 {
		t.Fatalf("%d profiles, want 3", len(ps))
	}
	var got int64
	for i, want := range []time.Duration{time.Second, time.Second, 500 * time.Millisecond} {
		if d := time.Duration(ps[i].DurationNanos); d != want && (i < 2 || d <= 0 || d > want) {
			t.Errorf("window %d lasts %v, want %v", i+1, d, want)
		}
		if i < 2 {
			got += siteTotal(ps[i], report.SampleAllocs, "")
		}
	}
	from := ps[0].TimeNanos - wall
	want := countAt(counts, from+int64(2*time.Second))
	t.Logf("%d allocations in the first two windows, the service counted %.0f", got, want)
	if math.Abs(float64(got)-want) > 0.01*want {
		t.Errorf("%d allocations in the first two windows, the service counted %.0f", got, want)
	}
}
