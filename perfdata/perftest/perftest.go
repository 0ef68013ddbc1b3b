// Package perftest helps tests check faultline against perf's own tools: it
// parses the text `perf script` prints and finds the repository's committed
// fixtures (testdata/, described in testdata/README.md). Like
// net/http/httptest it is meant for tests only.
package perftest

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Sample is one sample of `perf script` output: its header line and the
// stack frames printed under it.
type Sample struct {
	Line     int    // line number of the header, from 1
	Header   string // the header line as printed
	Comm     string
	Pid, Tid uint32
	Time     string // seconds as perf prints them: %d.%06d of the ns timestamp (%d.%09d with --ns)
	Event    string // "page-faults:u", "probe_libc:malloc", ...
	Rest     string // the header after "EVENT:": address, symbol, tracepoint fields
	Frames   []Frame
}

// Key identifies a sample across tools: "pid/tid time event".
func (s *Sample) Key() string {
	return fmt.Sprintf("%d/%d %s %s", s.Pid, s.Tid, s.Time, s.Event)
}

// Frame is one stack line of a sample, as printed. perf prints a user
// frame's address as an offset in its file (for every frame but the
// sampled IP, the return address); inlined functions come as extra frames
// at the same address with DSO "inlined".
type Frame struct {
	Addr uint64
	Sym  string // "[unknown]" when perf had no name
	DSO  string // the file, "[kernel.kallsyms]", "[unknown]" or "inlined"
}

var (
	headerRE = regexp.MustCompile(`^(\S.*?)\s+(\d+)/(\d+)\s+(\d+\.\d{6,9}):\s+(\S+):\s*(.*)$`)
	frameRE  = regexp.MustCompile(`^\s+([0-9a-f]+) (.*) \((.*)\)$`)
)

// ParseScript parses the output of `perf script -F
// comm,pid,tid,time,event,addr,ip,sym,dso,trace` (with or without
// --no-inline), or faultline script's, which has the same layout. A header
// line it cannot read is an error naming the line.
func ParseScript(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
		case line[0] == '\t' || line[0] == ' ':
			m := frameRE.FindStringSubmatch(line)
			if m == nil || len(out) == 0 {
				continue
			}
			addr, err := strconv.ParseUint(m[1], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: frame address %q: %v", n, m[1], err)
			}
			s := &out[len(out)-1]
			s.Frames = append(s.Frames, Frame{Addr: addr, Sym: m[2], DSO: m[3]})
		default:
			m := headerRE.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("line %d: not a perf script sample header: %q", n, line)
			}
			pid, _ := strconv.ParseUint(m[2], 10, 32)
			tid, _ := strconv.ParseUint(m[3], 10, 32)
			out = append(out, Sample{Line: n, Header: line, Comm: m[1], Pid: uint32(pid), Tid: uint32(tid), Time: m[4], Event: m[5], Rest: m[6]})
		}
	}
	return out, sc.Err()
}

// ReadScript parses the perf script text in a file, failing tb on any error.
func ReadScript(tb testing.TB, path string) []Sample {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := ParseScript(bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return s
}

// Root returns the repository's root directory (the one holding go.mod),
// found upwards from the test's working directory.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			tb.Fatal("perftest: no go.mod above the working directory")
		}
		dir = up
	}
}

// Testdata returns the path of a committed fixture under the repository's
// testdata/ directory and fails tb when it is missing: a missing fixture is a
// broken checkout (regenerate it with the generator its README names), not a
// reason to skip.
func Testdata(tb testing.TB, elem ...string) string {
	tb.Helper()
	p := filepath.Join(append([]string{Root(tb), "testdata"}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("committed fixture missing: %v (see testdata/README.md for how it is made)", err)
	}
	return p
}

// ReadTestdata returns the contents of a committed fixture (Testdata's
// path), failing tb when it cannot be read.
func ReadTestdata(tb testing.TB, elem ...string) []byte {
	tb.Helper()
	data, err := os.ReadFile(Testdata(tb, elem...))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// Glob returns the committed fixtures under testdata/ that match pattern
// (filepath.Match syntax, relative to testdata/), failing tb when none do.
func Glob(tb testing.TB, pattern string) []string {
	tb.Helper()
	m, err := filepath.Glob(filepath.Join(Root(tb), "testdata", pattern))
	if err != nil {
		tb.Fatal(err)
	}
	if len(m) == 0 {
		tb.Fatalf("no committed fixture matches testdata/%s (see testdata/README.md for how they are made)", pattern)
	}
	return m
}

// OpenELF opens the ELF file at path with debug/elf for the rest of the
// test, failing tb when it cannot be opened.
func OpenELF(tb testing.TB, path string) *elf.File {
	tb.Helper()
	f, err := elf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// Layout is where a little-endian perf.data file or stream keeps its
// parts (perf.data-file-format.txt), for tests that cut, corrupt or
// rearrange recordings.
type Layout struct {
	Pipe              bool
	AttrOff, AttrSize int // file mode: the attr section
	AttrEntry         int // file mode: bytes per attr entry
	DataOff, DataEnd  int
	Records           []int // offsets of the data section's records
}

// perf.data layout facts the walker needs.
const (
	pipeHeaderSize    = 16 // struct perf_pipe_file_header: magic, size
	headerTracingData = 66 // PERF_RECORD_HEADER_TRACING_DATA: its data follows the record
	compressed2       = 83 // PERF_RECORD_COMPRESSED2: data_size says the length
)

// ParseLayout finds the parts of p and walks its data section's records by
// their header sizes.
func ParseLayout(p []byte) (Layout, error) {
	le := binary.LittleEndian
	var l Layout
	if len(p) < pipeHeaderSize {
		return l, fmt.Errorf("%d bytes: too short for a perf.data header", len(p))
	}
	if le.Uint64(p[8:]) == pipeHeaderSize {
		l.Pipe = true
		l.DataOff, l.DataEnd = pipeHeaderSize, len(p)
	} else {
		if len(p) < 56 {
			return l, fmt.Errorf("%d bytes: too short for a perf.data file header", len(p))
		}
		// struct perf_file_header: magic, size, attr_size, attrs, data, ...
		l.AttrEntry = int(le.Uint64(p[16:]))
		l.AttrOff, l.AttrSize = int(le.Uint64(p[24:])), int(le.Uint64(p[32:]))
		l.DataOff = int(le.Uint64(p[40:]))
		l.DataEnd = l.DataOff + int(le.Uint64(p[48:]))
	}
	for off := l.DataOff; off+8 <= l.DataEnd; {
		typ, size := le.Uint32(p[off:]), int(le.Uint16(p[off+6:]))
		if size < 8 {
			return l, fmt.Errorf("record at %#x has size %d", off, size)
		}
		switch typ {
		case headerTracingData:
			size += (int(le.Uint32(p[off+8:])) + 7) &^ 7
		case compressed2:
			size = (16 + int(le.Uint64(p[off+8:])) + 7) &^ 7
		}
		l.Records = append(l.Records, off)
		off += size
	}
	return l, nil
}

// WithData returns p with its data section replaced by data, the header's
// data size and feature section offsets moved to match.
func (l Layout) WithData(p []byte, data []byte) []byte {
	out := append(append(append([]byte(nil), p[:l.DataOff]...), data...), p[l.DataEnd:]...)
	if l.Pipe {
		return out
	}
	delta := uint64(len(data) - (l.DataEnd - l.DataOff))
	le := binary.LittleEndian
	le.PutUint64(out[48:], uint64(len(data)))
	// The feature table follows the data; one 16-byte section per bit set
	// in the header's feature bitmap (at 72), each with an absolute offset.
	tab := l.DataOff + len(data)
	n := 0
	for i := range 4 {
		n += bits.OnesCount64(le.Uint64(out[72+8*i:]))
	}
	for i := range n {
		at := tab + 16*i
		if at+8 > len(out) {
			break
		}
		le.PutUint64(out[at:], le.Uint64(out[at:])+delta)
	}
	return out
}

// ZeroRecordSize returns a copy of the little-endian perf.data file or
// stream p in which the header of the first record from about frac of the
// data section on (0 ≤ frac < 1) claims size 0, a record whose length
// cannot be known, and that record's offset.
func ZeroRecordSize(tb testing.TB, p []byte, frac float64) (q []byte, off int) {
	tb.Helper()
	l, err := ParseLayout(p)
	if err != nil {
		tb.Fatal(err)
	}
	i, _ := slices.BinarySearch(l.Records, l.DataOff+int(float64(l.DataEnd-l.DataOff)*frac))
	if i == len(l.Records) {
		tb.Fatalf("no record from %.0f%% of the data on", 100*frac)
	}
	off = l.Records[i]
	q = append([]byte(nil), p...)
	binary.LittleEndian.PutUint16(q[off+6:], 0)
	return q, off
}

// RunChild reruns this test binary with FAULTLINE_CHILD=mode, running only
// test, and returns its output, its peak RSS (bytes) and its run time: for
// tests that bound what one hostile input may cost, measured in a fresh
// process.
func RunChild(tb testing.TB, test, mode string) (string, int64, time.Duration) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), "FAULTLINE_CHILD="+mode)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		tb.Fatalf("child: %v\n%s", err, out)
	}
	return string(out), cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10, took
}

// CheckText fails tb for each string of want that text lacks and each of
// not that it holds; what names the text in the messages.
func CheckText(tb testing.TB, what, text string, want, not []string) {
	tb.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			tb.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
	for _, n := range not {
		if strings.Contains(text, n) {
			tb.Errorf("%s should not say %q:\n%s", what, n, text)
		}
	}
}

// LookPerf returns perf's path, or skips tb: without perf it cannot check
// that perf reads what.
func LookPerf(tb testing.TB, what string) string {
	tb.Helper()
	perf, err := exec.LookPath("perf")
	if err != nil {
		tb.Skip("perf not in PATH: cannot check that perf reads " + what)
	}
	return perf
}

// RunPerf runs perf with args, and the file stdin on its standard input
// when stdin is not "", and returns what it printed on its standard output
// and its standard error; it fails tb when perf fails.
func RunPerf(tb testing.TB, perf, stdin string, args ...string) (stdout, stderr string) {
	tb.Helper()
	c := exec.Command(perf, args...)
	if stdin != "" {
		in, err := os.Open(stdin)
		if err != nil {
			tb.Fatal(err)
		}
		defer in.Close()
		c.Stdin = in
	}
	var errBuf bytes.Buffer
	c.Stderr = &errBuf
	out, err := c.Output()
	if err != nil {
		tb.Fatalf("perf %s: %v\n%s", strings.Join(args, " "), err, errBuf.String())
	}
	return string(out), errBuf.String()
}

// Create creates the file name in tb's temporary directory, closed when
// the test ends, and returns it and its path.
func Create(tb testing.TB, name string) (*os.File, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f, path
}
