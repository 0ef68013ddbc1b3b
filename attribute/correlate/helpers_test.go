package correlate

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fixture reads a committed fixture; a missing one fails the test.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("committed fixture missing (regenerate with testdata/gen.sh as root): %v", err)
	}
	return b
}

// bytesSource serves an in-memory access log for both passes.
func bytesSource(b []byte) AccessSource {
	return func(int) (io.Reader, error) { return bytes.NewReader(b), nil }
}

// trueOffset computes the offset of the trace clock from CLOCK_MONOTONIC
// (trace time − monotonic time) without faultline's parsers: selftrace
// wrote "fl_sync N" to the instance's trace_marker between two
// CLOCK_MONOTONIC readings t0 and t1 (its "sync N t0 t1" lines); ftrace
// stamped the marker, inside that write, with its trace clock. So
// T(marker) − (t0+t1)/2 is the offset within ±((t1−t0)/2 + 1µs) (the trace
// prints microseconds). The sync with the smallest bracket wins.
func trueOffset(t testing.TB, trace, sync []byte) (offset, uncertainty int64) {
	t.Helper()
	marks := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(trace))
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "tracing_mark_write: fl_sync ")
		if i < 0 {
			continue
		}
		n := strings.TrimSpace(line[i+len("tracing_mark_write: fl_sync "):])
		f := strings.Fields(line[:i])
		// The timestamp is the field ending in ':' before "print:" (trace-cmd) or the event.
		for j := len(f) - 1; j >= 0; j-- {
			if s, ok := strings.CutSuffix(f[j], ":"); ok && strings.Contains(s, ".") {
				whole, frac, _ := strings.Cut(s, ".")
				ws, err1 := strconv.ParseInt(whole, 10, 64)
				fs, err2 := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
				if err1 != nil || err2 != nil {
					t.Fatalf("marker time %q", s)
				}
				marks[n] = ws*1e9 + fs
				break
			}
		}
	}
	best := int64(math.MaxInt64)
	for _, line := range strings.Split(string(sync), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "sync" {
			continue
		}
		t0, _ := strconv.ParseInt(f[2], 10, 64)
		t1, _ := strconv.ParseInt(f[3], 10, 64)
		m, ok := marks[f[1]]
		if !ok {
			continue
		}
		if u := (t1-t0)/2 + 1000; u < best {
			best, offset = u, m-(t0+t1)/2
		}
	}
	if best == math.MaxInt64 {
		t.Fatalf("no fl_sync marker of the sync lines in the trace")
	}
	return offset, best
}

// coveredPages lists the pages an access log touches, read with plain
// string handling (not AccessReader): the last field of each line.
func coveredPages(t testing.TB, log []byte) map[uint64]bool {
	t.Helper()
	pages := map[uint64]bool{}
	for _, line := range strings.Split(string(log), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(line, "#") {
			continue
		}
		a, err := strconv.ParseUint(strings.TrimPrefix(f[len(f)-1], "0x"), 16, 64)
		if err != nil {
			t.Fatalf("access line %q: %v", line, err)
		}
		pages[a>>12] = true
	}
	return pages
}

// truth checks a result against what the kernel said: every fault on a
// page the access log covers is matched, and the share whose access has
// the fault's ip and exactly the byte the kernel reported (cr2) is
// returned.
func truth(t testing.TB, res *Result, pages map[uint64]bool) (covered, exact int) {
	t.Helper()
	for i := range res.Pairs {
		pr := &res.Pairs[i]
		f := pr.Fault
		if !pages[f.Addr>>12] {
			if pr.Kind != MatchNone {
				t.Errorf("fault at %#x ip %#x on a page the log never touches matched %v", f.Addr, f.IP, pr.Kind)
			}
			continue
		}
		covered++
		if pr.Kind == MatchNone {
			t.Errorf("fault at %#x ip %#x (tid %d, code %#x) on a covered page is unmatched: %v", f.Addr, f.IP, f.Tid, f.Code, pr.Reason)
			continue
		}
		if pr.Access.Addr>>12 != f.Addr>>12 {
			t.Errorf("fault at %#x matched an access on another page %#x", f.Addr, pr.Access.Addr)
		}
		if pr.Access.IP == f.IP && pr.Access.Addr == f.Addr {
			exact++
		}
	}
	return covered, exact
}
