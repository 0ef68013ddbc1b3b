package correlate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func readFtraceFixture(t *testing.T, name string) *FaultLog {
	t.Helper()
	log, err := ReadFtrace(bytes.NewReader(fixture(t, name)), FaultFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return log
}

func TestAccessLayouts(t *testing.T) {
	type row struct {
		ip, addr uint64
		write    bool
		time     int64
		tid      uint32
	}
	read := func(name string) ([]row, AccessLayout) {
		ar := newAccessReader(bytes.NewReader(fixture(t, name)))
		var out []row
		for ar.Next() {
			a := ar.Access()
			out = append(out, row{a.IP, a.Addr, a.Write, a.Time, a.Tid})
		}
		if err := ar.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out, ar.Layout()
	}
	tt, ltt := read("access.tt.log")
	tm, lt := read("access.t.log")
	pl, lp := read("access.plain.log")
	if ltt != (AccessLayout{Time: true, Tid: true}) || lt != (AccessLayout{Time: true}) || lp != (AccessLayout{}) {
		t.Fatalf("layouts %+v %+v %+v", ltt, lt, lp)
	}
	// gen.sh derived access.t.log and access.plain.log from access.tt.log
	// with sed: the same accesses, fewer columns.
	lines := strings.Count(string(fixture(t, "access.tt.log")), "\n") - 1 // #eof
	if len(tt) != lines || len(tm) != lines || len(pl) != lines {
		t.Fatalf("accesses %d %d %d, want %d (lines of access.tt.log)", len(tt), len(tm), len(pl), lines)
	}
	for i := range tt {
		if tm[i] != (row{tt[i].ip, tt[i].addr, tt[i].write, tt[i].time, 0}) || pl[i] != (row{tt[i].ip, tt[i].addr, tt[i].write, 0, 0}) {
			t.Fatalf("access %d differs: %+v %+v %+v", i, tt[i], tm[i], pl[i])
		}
	}
}

// faults.trace (the instance's trace file) and faults.tracecmd (trace-cmd
// report of the same buffer) are two tools' renderings of one ring buffer.
func TestFtraceLayouts(t *testing.T) {
	a := readFtraceFixture(t, "faults.trace")
	b := readFtraceFixture(t, "faults.tracecmd")
	if b.Format != "trace-cmd report" || a.Format != "ftrace" {
		t.Errorf("formats %q %q", a.Format, b.Format)
	}
	want := strings.Count(string(fixture(t, "faults.trace")), " page_fault_user: ")
	if len(a.Faults) != want || len(b.Faults) != want {
		t.Fatalf("faults %d and %d, want %d (lines with page_fault_user)", len(a.Faults), len(b.Faults), want)
	}
	for i := range a.Faults {
		fa, fb := a.Faults[i], b.Faults[i]
		fa.Where, fb.Where = 0, 0
		if fa != fb {
			t.Fatalf("fault %d: trace %+v, trace-cmd %+v", i, fa, fb)
		}
	}
	// The comm filter must see "selftrace" in both layouts (trace-cmd
	// prefixes the instance name).
	for _, name := range []string{"faults.trace", "faults.tracecmd"} {
		l, err := ReadFtrace(bytes.NewReader(fixture(t, name)), FaultFilter{Comm: "selftrace"})
		if err != nil || len(l.Faults) != want {
			t.Errorf("%s --comm selftrace: %d faults, %v", name, len(l.Faults), err)
		}
		l, err = ReadFtrace(bytes.NewReader(fixture(t, name)), FaultFilter{Comm: "other"})
		if err != nil || len(l.Faults) != 0 || l.Filtered != uint64(want) {
			t.Errorf("%s --comm other: %d faults, %d filtered, %v", name, len(l.Faults), l.Filtered, err)
		}
	}
}

func TestMatchFixtures(t *testing.T) {
	for _, tc := range []struct {
		access, faults, sync string
		mode                 string
	}{
		{"access.tt.log", "faults.trace", "sync.txt", "time"},
		{"access.t.log", "faults.trace", "sync.txt", "time"},
		{"access.tt.log", "faults.tracecmd", "sync.txt", "time"},
		{"access.plain.log", "faults.trace", "", "order"},
		{"local.access.tt.log", "local.faults.trace", "local.sync.txt", "time"},
	} {
		t.Run(tc.access+"+"+tc.faults, func(t *testing.T) {
			log := readFtraceFixture(t, tc.faults)
			acc := fixture(t, tc.access)
			res, err := Run(log, bytesSource(acc), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != tc.mode {
				t.Errorf("mode %s, want %s", res.Mode, tc.mode)
			}
			covered, exact := truth(t, res, coveredPages(t, acc))
			if covered == 0 || float64(exact) < 0.99*float64(covered) {
				t.Errorf("%d of %d faults on covered pages matched to the exact ip and byte, want >= 99%%", exact, covered)
			}
			if tc.sync == "" {
				return
			}
			want, unc := trueOffset(t, fixture(t, tc.faults), fixture(t, tc.sync))
			diff := res.Offset - want
			t.Logf("covered %d, exact %d; offset %v, true %v ± %v (diff %v); window %v", covered, exact,
				time.Duration(res.Offset), time.Duration(want), time.Duration(unc), time.Duration(diff), res.Window)
			if abs(diff) > int64(time.Millisecond) {
				t.Errorf("offset %v is %v from the true %v", time.Duration(res.Offset), time.Duration(diff), time.Duration(want))
			}
		})
	}
}

// pinLike moves every fault's ip, as Pin's code cache does: the faulting
// instruction is a copy of the logged one.
func pinLike(log *FaultLog) {
	for i := range log.Faults {
		log.Faults[i].IP += 1 << 44
	}
}

func TestRareIPMatches(t *testing.T) {
	for _, tc := range []struct{ access, faults, sync string }{
		{"access.tt.log", "faults.trace", "sync.txt"},
		{"local.access.tt.log", "local.faults.trace", "local.sync.txt"},
	} {
		log := readFtraceFixture(t, tc.faults)
		pinLike(log)
		acc := fixture(t, tc.access)
		res, err := Run(log, bytesSource(acc), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.ExactRare || res.OffsetFrom != "page" {
			t.Errorf("%s: ExactRare %v, offset from %q; want true, page", tc.faults, res.ExactRare, res.OffsetFrom)
		}
		var buf bytes.Buffer
		WriteSummary(&buf, res, log)
		if !strings.Contains(buf.String(), "exact ip matches are rare") {
			t.Errorf("summary does not say ip matches are rare:\n%s", buf.String())
		}
		pages := coveredPages(t, acc)
		covered, sameByte := 0, 0
		for i := range res.Pairs {
			pr := &res.Pairs[i]
			if !pages[pr.Fault.Addr>>12] {
				continue
			}
			covered++
			if pr.Kind != MatchPage {
				t.Errorf("fault %#x: %v, want page", pr.Fault.Addr, pr.Kind)
			}
			if pr.Access.Addr == pr.Fault.Addr {
				sameByte++
			}
		}
		// Page and time cannot tell an access logged long before its fault
		// (the thread preempted) from the next access to the page: allow
		// two misses in these ~90 faults (the live test asks 99% of ~4700).
		if sameByte < covered-2 {
			t.Errorf("%s: page+time matched %d of %d faults to the byte the kernel reported, want all but 2", tc.faults, sameByte, covered)
		}
		want, _ := trueOffset(t, fixture(t, tc.faults), fixture(t, tc.sync))
		if d := abs(res.Offset - want); d > int64(time.Millisecond) {
			t.Errorf("%s: offset from first touches %v, true %v", tc.faults, time.Duration(res.Offset), time.Duration(want))
		}
	}
}

// A pipe is read once: matching in log order, the offset checked afterwards.
func TestOnePass(t *testing.T) {
	log := readFtraceFixture(t, "faults.trace")
	acc := fixture(t, "access.tt.log")
	src := func(pass int) (io.Reader, error) {
		if pass > 1 {
			return nil, ErrOnce
		}
		return bytes.NewReader(acc), nil
	}
	res, err := Run(log, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "order" || res.Passes != 1 || len(res.Warnings) == 0 {
		t.Errorf("mode %s, passes %d, warnings %q", res.Mode, res.Passes, res.Warnings)
	}
	covered, exact := truth(t, res, coveredPages(t, acc))
	if float64(exact) < 0.99*float64(covered) {
		t.Errorf("one pass: %d of %d exact", exact, covered)
	}
}

// A given offset far off the truth leaves every fault unmatched, with the
// reason saying on which side the accesses fell.
func TestGivenOffsetReasons(t *testing.T) {
	log := readFtraceFixture(t, "faults.trace")
	acc := fixture(t, "access.tt.log")
	pages := coveredPages(t, acc)
	for _, tc := range []struct {
		offset time.Duration
		want   Reason
	}{
		{time.Second, ReasonOnlyAfter}, // accesses land a second after the faults
		{-time.Second, ReasonWindow},   // a second before
	} {
		res, err := Run(log, bytesSource(acc), Options{Offset: int64(tc.offset), OffsetSet: true, Window: 100 * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.OffsetFrom != "given" || res.Window != 100*time.Microsecond {
			t.Errorf("offset from %q window %v", res.OffsetFrom, res.Window)
		}
		for i := range res.Pairs {
			pr := &res.Pairs[i]
			if !pages[pr.Fault.Addr>>12] {
				if pr.Reason != ReasonNoAccess {
					t.Errorf("uncovered fault %#x: reason %v", pr.Fault.Addr, pr.Reason)
				}
				continue
			}
			if pr.Kind != MatchNone || pr.Reason != tc.want {
				t.Errorf("offset %v: fault %#x %v/%v, want none/%v", tc.offset, pr.Fault.Addr, pr.Kind, pr.Reason, tc.want)
				break
			}
		}
	}
}

// Pin numbers threads 0, 1, 2, ...: auto does not compare such ids, match
// does (and then no fault's thread is covered).
func TestThreads(t *testing.T) {
	log := readFtraceFixture(t, "faults.trace")
	var b strings.Builder
	for _, line := range strings.Split(string(fixture(t, "access.tt.log")), "\n") {
		f := strings.Fields(line)
		if len(f) == 5 {
			f[1] = "0:"
			line = strings.Join(f, " ")
		}
		b.WriteString(line + "\n")
	}
	acc := []byte(b.String())
	res, err := Run(log, bytesSource(acc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Threads || !strings.Contains(res.ThreadMsg, "first thread id 0") {
		t.Errorf("auto: threads %v (%s)", res.Threads, res.ThreadMsg)
	}
	if covered, exact := truth(t, res, coveredPages(t, acc)); exact < covered*99/100 {
		t.Errorf("auto without thread ids: %d of %d exact", exact, covered)
	}
	res, err = Run(log, bytesSource(acc), Options{Threads: "match"})
	if err != nil {
		t.Fatal(err)
	}
	_, byReason := res.counts()
	if byReason[ReasonThread] != len(res.Pairs) {
		t.Errorf("--threads match with Pin thread ids: %d of %d faults on an uncovered thread", byReason[ReasonThread], len(res.Pairs))
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0x1: R 0x2\n0x3: R 0x4\nnot an access\n", "access log line 3 (offset 0x16)"},
		{"0x1: R 0x2\n1.5: 0x3: R 0x4\n", "columns differ"},
		{"0x1: X 0x2\n", "access type is not R or W"},
		{"0x1: R zz\n", "bad address"},
		{"1.2.3: 0x1: R 0x2\n", "bad time"},
		{"0x" + strings.Repeat("1", 5000) + ": R 0x2\n", "longer than"},
	} {
		ar := newAccessReader(strings.NewReader(tc.in))
		for ar.Next() {
		}
		var fe *FormatError
		if err := ar.Err(); !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.40q: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
	// A last line cut short is skipped with a warning.
	ar := newAccessReader(strings.NewReader("0x1: R 0x2\n0x3: R 0x"))
	n := 0
	for ar.Next() {
		n++
	}
	if ar.Err() != nil || !ar.Truncated || n != 1 {
		t.Errorf("cut-short last line: n %d truncated %v err %v", n, ar.Truncated, ar.Err())
	}
	for _, tc := range []struct{ in, want string }{
		{"a-1 [000] d.... 5.000001: page_fault_user: address=0x1000\nx\n", "without address= and ip="},
		{"a-1 [000] d.... 5000001: page_fault_user: address=0x1000 ip=0x1\n", "trace_clock counter"},
		{"a-x [000] 5.1: page_fault_user: address=0x1000 ip=0x1\n", "bad task pid"},
		{"a-1 5.1: page_fault_user: address=0x1000 ip=0x1\n", "no [CPU] field"},
	} {
		_, err := ReadFtrace(strings.NewReader(tc.in), FaultFilter{})
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) || fe.Line != 1 {
			t.Errorf("%.40q: error %v, want one at line 1 containing %q", tc.in, err, tc.want)
		}
	}
	// Lost events are counted and reported.
	l, err := ReadFtrace(strings.NewReader("CPU:1 [LOST 17 EVENTS]\na-1 (  1) [000] d.... 5.000001: page_fault_user: address=0x1000 ip=0x2 error_code=0x6\n"), FaultFilter{Pid: 1})
	if err != nil || l.Lost != 17 || len(l.Warnings) != 1 || len(l.Faults) != 1 || l.Faults[0].Pid != 1 || l.Faults[0].Time != 5000001000 {
		t.Errorf("lost: %+v %v", l, err)
	}
}

func TestPairsFile(t *testing.T) {
	log := readFtraceFixture(t, "faults.trace")
	res, err := Run(log, bytesSource(fixture(t, "access.tt.log")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WritePairs(&buf, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if lines[0]+"\n" != pairsHeader || !strings.HasPrefix(lines[0], "fault_time\tfault_addr\tfault_ip\taccess_time\taccess_ip\taccess_addr\tmatch\t") {
		t.Fatalf("header %q", lines[0])
	}
	if len(lines)-1 != len(res.Pairs) {
		t.Fatalf("%d rows, want %d", len(lines)-1, len(res.Pairs))
	}
	cols := len(strings.Split(lines[0], "\t"))
	for i, l := range lines[1:] {
		f := strings.Split(l, "\t")
		pr := &res.Pairs[i]
		if len(f) != cols || f[6] != pr.Kind.String() || f[1] != fmt.Sprintf("%#x", pr.Fault.Addr) {
			t.Fatalf("row %d %q for %+v", i, l, pr)
		}
		if pr.Kind != MatchNone && (f[5] != fmt.Sprintf("%#x", pr.Access.Addr) || f[3] != fmt.Sprintf("%d.%09d", pr.Access.Time/1e9, pr.Access.Time%1e9)) {
			t.Fatalf("row %d %q for %+v", i, l, pr)
		}
	}
}

// With the offset given, one pass matches by time, also from a pipe.
func TestGivenOffsetOnePass(t *testing.T) {
	log := readFtraceFixture(t, "local.faults.trace")
	acc := fixture(t, "local.access.tt.log")
	want, _ := trueOffset(t, fixture(t, "local.faults.trace"), fixture(t, "local.sync.txt"))
	src := func(pass int) (io.Reader, error) {
		if pass > 1 {
			return nil, ErrOnce
		}
		return bytes.NewReader(acc), nil
	}
	res, err := Run(log, src, Options{Offset: want, OffsetSet: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "time" || res.Passes != 1 || res.Window != time.Millisecond || len(res.Warnings) != 0 {
		t.Errorf("mode %s passes %d window %v warnings %q", res.Mode, res.Passes, res.Window, res.Warnings)
	}
	covered, exact := truth(t, res, coveredPages(t, acc))
	if exact < covered*99/100 {
		t.Errorf("%d of %d exact", exact, covered)
	}
}

// Faults whose ip the access log does not have fall back to page and time
// also when exact matches are common.
func TestMixedIPMatches(t *testing.T) {
	log := readFtraceFixture(t, "local.faults.trace")
	moved := map[*Fault]bool{}
	for i := range log.Faults {
		if i%3 == 0 {
			log.Faults[i].IP += 1 << 44
			moved[&log.Faults[i]] = true
		}
	}
	acc := fixture(t, "local.access.tt.log")
	res, err := Run(log, bytesSource(acc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExactRare || res.OffsetFrom != "ip" {
		t.Errorf("ExactRare %v, offset from %q", res.ExactRare, res.OffsetFrom)
	}
	pages := coveredPages(t, acc)
	for i := range res.Pairs {
		pr := &res.Pairs[i]
		if !pages[pr.Fault.Addr>>12] {
			continue
		}
		want := MatchIP
		if moved[pr.Fault] {
			want = MatchPage
		}
		if pr.Kind != want || pr.Access.Addr != pr.Fault.Addr {
			t.Errorf("fault %#x (moved %v): %v at %#x, want %v at the faulting byte", pr.Fault.Addr, moved[pr.Fault], pr.Kind, pr.Access.Addr, want)
		}
	}
}
