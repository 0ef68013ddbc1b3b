package correlate

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/symtest"
)

const tracefs = "/sys/kernel/tracing"

// liveSetup skips unless this test can trace: root, tracefs instances, cc.
func liveSetup(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("live test: needs root and tracefs; skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("live test: needs root (writes tracefs)")
	}
	if _, err := os.Stat(filepath.Join(tracefs, "instances")); err != nil {
		t.Skipf("live test: no tracefs instances at %s: %v", tracefs, err)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("live test: no C compiler (cc)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "selftrace")
	if out, err := exec.Command(cc, "-O1", "-g", "-pthread", "-o", bin, filepath.Join("testdata", "selftrace.c")).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	return bin
}

// rtRunner is chrt(1), which runs selftrace SCHED_FIFO: a logged access's
// timestamp is taken just before the access, and on a loaded machine a
// normal-priority thread can be preempted between the two for longer than
// the matcher's window (the access then lies outside it, the fault
// unmatched). Real-time priority keeps the log's truth exact under any
// load of normal tasks, so every fault on a covered page must still match.
func rtRunner(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chrt")
	if err != nil {
		t.Skip("live test: no chrt (util-linux) to run selftrace at real-time priority")
	}
	return p
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// traceSelf runs selftrace over npages pages while an ftrace instance of
// this test's own (removed afterwards) records page_fault_user for it with
// the given trace_clock. It returns the access log, the trace and the sync
// lines.
func traceSelf(t *testing.T, bin, clock string, npages int) (acc, trace, sync []byte) {
	t.Helper()
	dir := t.TempDir()
	inst := filepath.Join(tracefs, "instances", fmt.Sprintf("fl_correlate_%d_%s", os.Getpid(), clock))
	if err := os.Mkdir(inst, 0o755); err != nil {
		t.Fatalf("creating our ftrace instance: %v", err)
	}
	enable := filepath.Join(inst, "events", "exceptions", "page_fault_user", "enable")
	defer func() {
		os.WriteFile(filepath.Join(inst, "tracing_on"), []byte("0"), 0)
		os.WriteFile(enable, []byte("0"), 0)
		if err := os.Remove(inst); err != nil {
			t.Errorf("removing our ftrace instance %s: %v", inst, err)
		}
	}()
	writeFile(t, filepath.Join(inst, "buffer_size_kb"), "16384")
	writeFile(t, filepath.Join(inst, "trace_clock"), clock)
	writeFile(t, filepath.Join(inst, "options", "event-fork"), "1")
	logPath, goPath := filepath.Join(dir, "access.log"), filepath.Join(dir, "go")
	cmd := exec.Command(rtRunner(t), "--fifo", "10", bin, "-n", fmt.Sprint(npages), "-m", filepath.Join(inst, "trace_marker"), "-g", goPath, logPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("selftrace pid: %v", err)
	}
	writeFile(t, filepath.Join(inst, "set_event_pid"), strings.TrimSpace(pid))
	writeFile(t, enable, "1")
	writeFile(t, filepath.Join(inst, "tracing_on"), "1")
	writeFile(t, goPath, "")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("selftrace: %v\n%s", err, stderr.String())
	}
	writeFile(t, filepath.Join(inst, "tracing_on"), "0")
	trace, err = os.ReadFile(filepath.Join(inst, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	if acc, err = os.ReadFile(logPath); err != nil {
		t.Fatal(err)
	}
	return acc, trace, stderr.Bytes()
}

// TestLiveSelftrace, on this machine: every fault on a page
// the access log covers is matched, >= 99% to the exact faulting ip (and
// byte); the estimated offset within 1 ms of the true one (trace_marker
// bracketed by CLOCK_MONOTONIC readings), for trace_clock mono and local.
func TestLiveSelftrace(t *testing.T) {
	bin := liveSetup(t)
	for _, clock := range []string{"mono", "local"} {
		t.Run(clock, func(t *testing.T) {
			acc, trace, sync := traceSelf(t, bin, clock, 2000)
			log, err := ReadFtrace(bytes.NewReader(trace), FaultFilter{Comm: "selftrace"})
			if err != nil {
				t.Fatal(err)
			}
			if log.Lost > 0 {
				t.Fatalf("ftrace lost %d events; the test cannot tell", log.Lost)
			}
			res, err := Run(log, bytesSource(acc), Options{})
			if err != nil {
				t.Fatal(err)
			}
			covered, exact := truth(t, res, coveredPages(t, acc))
			byKind, _ := res.counts()
			want, unc := trueOffset(t, trace, sync)
			diff := res.Offset - want
			t.Logf("trace_clock %s: %d faults, %d on covered pages, all matched: %d ip+page, %d page+time; exact ip and byte %d (%.2f%%); offset %v (true %v ± %v, error %v), window %v, %d accesses",
				clock, len(res.Pairs), covered, byKind[MatchIP], byKind[MatchPage], exact, 100*float64(exact)/float64(covered),
				time.Duration(res.Offset), time.Duration(want), time.Duration(unc), time.Duration(diff), res.Window, res.Accesses)
			if float64(exact) < 0.99*float64(covered) {
				t.Errorf("%d of %d covered faults matched to the exact ip and byte, want >= 99%%", exact, covered)
			}
			if abs(diff) > int64(time.Millisecond) {
				t.Errorf("offset %v is %v from the true %v", time.Duration(res.Offset), time.Duration(diff), time.Duration(want))
			}
			// Pin's code cache: no exact ips; page and time must still find the byte.
			pinLike(log)
			res, err = Run(log, bytesSource(acc), Options{})
			if err != nil {
				t.Fatal(err)
			}
			same := 0
			pages := coveredPages(t, acc)
			for i := range res.Pairs {
				if pr := &res.Pairs[i]; pages[pr.Fault.Addr>>12] && pr.Kind == MatchPage && pr.Access.Addr == pr.Fault.Addr {
					same++
				}
			}
			t.Logf("with ips moved (Pin's code cache): ExactRare %v, offset %v from %s, %d of %d covered faults matched by page+time to the exact byte",
				res.ExactRare, time.Duration(res.Offset), res.OffsetFrom, same, covered)
			if !res.ExactRare || float64(same) < 0.99*float64(covered) || abs(res.Offset-want) > int64(time.Millisecond) {
				t.Errorf("page+time fallback: rare %v, %d of %d to the byte, offset %v (true %v)", res.ExactRare, same, covered, time.Duration(res.Offset), time.Duration(want))
			}
		})
	}
}

// perf.data as the fault log: perf records the tracepoint with
// CLOCK_MONOTONIC timestamps (-k mono), so the true offset is 0.
func TestLivePerf(t *testing.T) {
	bin := liveSetup(t)
	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Skip("live test: no perf")
	}
	dir := t.TempDir()
	data, logPath := filepath.Join(dir, "perf.data"), filepath.Join(dir, "access.log")
	cmd := exec.Command(perf, "record", "-q", "-k", "mono", "-e", "exceptions:page_fault_user", "-o", data, "--", rtRunner(t), "--fifo", "10", bin, "-n", "500", logPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	acc, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	r, sess := symtest.Open(t, data, symbolize.Config{})
	log, err := ReadPerf(r, FaultFilter{Comm: "selftrace"}, sess)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(log, bytesSource(acc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	covered, exact := truth(t, res, coveredPages(t, acc))
	t.Logf("perf.data (-k mono): %d faults, %d covered, %d exact; offset %v, window %v", len(res.Pairs), covered, exact, time.Duration(res.Offset), res.Window)
	if float64(exact) < 0.99*float64(covered) {
		t.Errorf("%d of %d exact", exact, covered)
	}
	if abs(res.Offset) > int64(time.Millisecond) {
		t.Errorf("offset %v between two CLOCK_MONOTONIC logs", time.Duration(res.Offset))
	}
	// The perf.data's mappings name the accessing instructions: the access
	// functions whose labelled load or store selftrace.c logs.
	p := Profile(res, &Symbolizer{Sess: sess, Pid: -1})
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	for _, smp := range p.Sample {
		if smp.Label["match"][0] != "ip" {
			continue
		}
		l := smp.Location[0]
		name := ""
		if len(l.Line) > 0 {
			name = l.Line[len(l.Line)-1].Function.Name
		}
		if name != "rd" && name != "wr" && name != "wr2" {
			t.Errorf("exact match at %#x named %q, want rd, wr or wr2", l.Address, name)
		}
	}
}
