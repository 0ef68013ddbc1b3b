package correlate

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
)

// faultLine is one ftrace page_fault_user line of task comm-100.
func faultLine(comm, ts string, addr uint64) string {
	return fmt.Sprintf(" %s-100 [001] d.... %s: page_fault_user: address=0x%x ip=0x400100 error_code=0x6\n", comm, ts, addr)
}

// TestFtraceHostileLines reads fault-log lines whose task names look like
// other parts of a line ("w[0]", "[LOST 7]x") and whose timestamps reach or
// pass what int64 nanoseconds hold: each is read as a fault of its task,
// or refused, never misread.
func TestFtraceHostileLines(t *testing.T) {
	// A task named with [digits]: its fault is read, and --comm of
	// another program leaves it out instead of stopping the run.
	line := faultLine("w[0]", "100.000100", 0x10008)
	for _, c := range []struct {
		comm           string
		kept, filtered int
	}{{"", 1, 0}, {"w[0]", 1, 0}, {"other", 0, 1}} {
		log, err := ReadFtrace(strings.NewReader(line), FaultFilter{Comm: c.comm})
		if err != nil {
			t.Fatalf("--comm %q: %v", c.comm, err)
		}
		if len(log.Faults) != c.kept || int(log.Filtered) != c.filtered {
			t.Errorf("--comm %q: %d kept, %d filtered; want %d, %d", c.comm, len(log.Faults), log.Filtered, c.kept, c.filtered)
		}
		if c.kept == 1 && (log.Faults[0].Tid != 100 || log.Faults[0].Addr != 0x10008 || log.Faults[0].Time != 100_000_100_000) {
			t.Errorf("--comm %q: fault %+v", c.comm, log.Faults[0])
		}
	}
	// A task named "[LOST 7]x" is a task, not a loss; the tracer's own
	// loss line still counts.
	log, err := ReadFtrace(strings.NewReader(faultLine("[LOST 7]x", "100.000100", 0x10008)+"CPU:1 [LOST 123 EVENTS]\n"), FaultFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Faults) != 1 || log.Lost != 123 {
		t.Errorf("[LOST 7]x: %d faults, %d lost; want 1 and 123", len(log.Faults), log.Lost)
	}
	// The largest timestamp int64 nanoseconds hold, and one past it,
	// which must be refused, not wrap negative.
	log, err = ReadFtrace(strings.NewReader(faultLine("p", "9223372036.854775807", 0x10008)), FaultFilter{})
	if err != nil || len(log.Faults) != 1 || log.Faults[0].Time != 1<<63-1 {
		t.Errorf("9223372036.854775807 s: %v %+v", err, log)
	}
	for _, ts := range []string{"9223372036.854775808", "9223372037.000000"} {
		_, err = ReadFtrace(strings.NewReader(faultLine("p", ts, 0x10008)), FaultFilter{})
		if err == nil || !strings.Contains(err.Error(), "below 2^63 ns") {
			t.Errorf("%s s: %v, want a bad-timestamp error", ts, err)
		}
	}
}

// sameTimeLog is n faults on one page at one timestamp, and an access
// log of one access just before them.
func sameTimeLog(t testing.TB, n int) (*FaultLog, []byte) {
	var b strings.Builder
	for range n {
		b.WriteString(faultLine("p", "100.000100", 0x10008))
	}
	log, err := ReadFtrace(strings.NewReader(b.String()), FaultFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return log, []byte("100.000050: 100: 0x400100: W 0x10008\n")
}

// Many faults on one page at one timestamp cost time linear in their
// number: 8 times the faults take well under the 64 times as long a
// quadratic cost would.
func TestSamePageSameTimeLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("times 400k faults; skipped with -short")
	}
	// CPU time of the thread that runs Run (CLOCK_THREAD_CPUTIME_ID, to
	// the nanosecond; getrusage counts in ticks), best of three: the
	// packages CI tests in parallel slow a wall clock, not this thread's
	// CPU. What is timed is Run's own work, not the memory system's: one
	// untimed run of the larger size first grows the heap, so that no
	// timed run pays for first touches of new memory (10-20 µs a page on
	// a virtual machine), and each timed run starts from a collected heap
	// with room to finish without a collection (whose assists, paced by
	// the whole heap, the larger size alone would pay).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	cpu := func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ts.Nano())
	}
	run := func(n int) time.Duration {
		log, acc := sameTimeLog(t, n)
		best := time.Duration(1 << 62)
		for range 3 {
			runtime.GC()
			start := cpu()
			res, err := Run(log, bytesSource(acc), Options{})
			if err != nil {
				t.Fatal(err)
			}
			best = min(best, cpu()-start)
			if len(res.Pairs) != n {
				t.Fatalf("%d pairs for %d faults", len(res.Pairs), n)
			}
		}
		return best
	}
	run(400_000)
	small, big := run(50_000), run(400_000)
	t.Logf("50k faults: %v of CPU, 400k: %v (%.1f×)", small, big, float64(big)/float64(small))
	if big > 24*small {
		t.Errorf("8× the faults took %.1f× as long: not linear", float64(big)/float64(small))
	}
}

// An access log in reverse time order is said to be one; with exactly one
// exact match the offset comes from it (the summary does not say that no
// fault's page is in the access log).
func TestAccessLogOrderAndOneMatch(t *testing.T) {
	log, err := ReadFtrace(strings.NewReader(faultLine("p", "100.000100", 0x10008)+faultLine("p", "100.200100", 0x20008)), FaultFilter{})
	if err != nil {
		t.Fatal(err)
	}
	fwd := "100.000090: 100: 0x400100: W 0x10008\n100.200090: 100: 0x400100: W 0x20008\n"
	rev := "100.200090: 100: 0x400100: W 0x20008\n100.000090: 100: 0x400100: W 0x10008\n"
	for _, c := range []struct {
		name, acc string
		warn      bool
	}{{"in order", fwd, false}, {"reversed", rev, true}} {
		res, err := Run(log, bytesSource([]byte(c.acc)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		warned := strings.Contains(strings.Join(res.Warnings, "\n"), "time goes backwards 1 times")
		if warned != c.warn {
			t.Errorf("%s: warned %v, want %v: %q", c.name, warned, c.warn, res.Warnings)
		}
	}

	one, err := ReadFtrace(strings.NewReader(faultLine("p", "100.000100", 0x10008)), FaultFilter{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(one, bytesSource([]byte("100.000090: 100: 0x400100: W 0x10008\n")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sum bytes.Buffer
	WriteSummary(&sum, res, one)
	// Fault at 100.000100, access at 100.000090: offset 10 µs.
	if res.OffsetFrom != "ip" || res.Offset != 10_000 || strings.Contains(sum.String(), "no fault's page") {
		t.Errorf("one exact match: offset %d from %q; summary:\n%s", res.Offset, res.OffsetFrom, sum.String())
	}
}

// A perf.data whose page-faults samples carry no data address (recorded
// without -d) is refused as such (ErrNoFaultAddress, for which the command
// says to record with -d), not as a log without page faults.
func TestReadPerfWithoutAddr(t *testing.T) {
	f, path := perftest.Create(t, "nod.data")
	st := perfdata.SampleFormat(perfdata.SampleIdentifier) | perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime
	w, err := perfdata.NewWriter(f, []perfdata.WriterEvent{{Name: "page-faults", IDs: []uint64{1},
		Attr: perfdata.Attr{Type: perfdata.TypeSoftware, Config: 2, SamplePeriod: 1, SampleType: st, Flags: perfdata.AttrSampleIDAll}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	for _, v := range []uint64{1, 0x400100, 100 | 100<<32, 1000} { // id, ip, pid/tid, time
		for i := range 8 {
			body = append(body, byte(v>>(8*i)))
		}
	}
	if err := w.WriteRecordParts(uint32(perfdata.RecordSample), perfdata.MiscUser, body); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(nil); err != nil {
		t.Fatal(err)
	}
	r, err := perfdata.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = ReadPerf(r, FaultFilter{}, nil)
	if err == nil || !strings.Contains(err.Error(), "no data address") || !errors.Is(err, ErrNoFaultAddress) {
		t.Errorf("got %v, want the record-with--d hint", err)
	}
}
