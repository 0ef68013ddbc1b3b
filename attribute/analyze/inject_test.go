package analyze

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/binfile"
)

// Fault injection over the fixture recordings: every corruption a disk, a
// killed perf or a hostile user can produce, run through the whole analyze
// pipeline in-process. Properties, for every run:
//
//   - no panic;
//   - it ends within 2× the clean run's wall time and memory (allocated
//     bytes and peak heap), plus a constant for CI noise;
//   - an error only when nothing usable was read: no sample decoded, or the
//     events cannot be identified because the file lost its feature section
//     (and then the error says it was truncated);
//   - every decoder warning and error names the offset ("0x...").
//
// A recording cut inside its data yields the profile of everything before
// the cut: marked truncated, with no more faults than the whole recording
// and never fewer than an earlier cut.

const (
	symfsDir   = "../../testdata/symfs"
	buildIDDir = "../../testdata/buildid-cache"
)

func cleanConfig() symbolize.Config {
	return symbolize.Config{Symfs: symfsDir, BuildIDDir: buildIDDir, Getenv: func(string) string { return "" }}
}

// injectRun is one pipeline run over (possibly corrupt) bytes.
type injectRun struct {
	res      *Result
	err      error
	warnings []string      // the decoder's
	samples  uint64        // SAMPLE records the decoder delivered
	buildIDs int           // build IDs the recording lists
	dur      time.Duration // wall time
	cpu      time.Duration // the process's CPU time: steadier on a shared machine
	alloc    uint64        // bytes allocated during the run
	peak     uint64        // peak heap object bytes above the level before the run
}

var heapMetrics = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}

func readHeap() (objects, allocs uint64) {
	s := make([]metrics.Sample, len(heapMetrics))
	copy(s, heapMetrics)
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// runBytes analyzes data as analyze would a file, recovering any panic as a
// test failure naming the corruption.
func runBytes(t *testing.T, what string, data []byte, cfg symbolize.Config) (out injectRun) {
	t.Helper()
	runtime.GC()
	base, alloc0 := readHeap()
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if h, _ := readHeap(); h > peak {
				peak = h
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start, cpu0 := time.Now(), cpuTime()
	defer func() {
		out.dur, out.cpu = time.Since(start), cpuTime()-cpu0
		close(stop)
		wg.Wait()
		h, alloc1 := readHeap()
		peak = max(peak, h)
		out.alloc = alloc1 - alloc0
		if peak > base {
			out.peak = peak - base
		}
		if p := recover(); p != nil {
			t.Fatalf("%s: panic: %v\n%s", what, p, debug.Stack())
		}
	}()
	r, err := perfdata.New(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		out.err = err
		return out
	}
	defer r.Close()
	sess, err := symbolize.NewSession(cfg, r.Meta())
	if err != nil {
		out.err = err
		return out
	}
	defer sess.Close()
	out.res, out.err = Run(r, sess, Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc})
	for _, w := range r.Warnings() {
		out.warnings = append(out.warnings, w.Error())
	}
	out.samples = r.Stats().Records[perfdata.RecordSample]
	out.buildIDs = len(r.Meta().BuildIDs)
	if out.res != nil {
		if err := out.res.Profile.CheckValid(); err != nil {
			t.Errorf("%s: invalid profile: %v", what, err)
		}
	}
	return out
}

// injector runs the corruptions of one fixture and checks the properties
// against its clean run.
type injector struct {
	t     *testing.T
	name  string
	clean injectRun
	// counts holds per kind the runs ending in a profile without decoder
	// warnings, one with warnings, one marked truncated (or stopped
	// early), and an error.
	counts   map[string]*[4]int
	worstT   float64 // largest wall-time ratio vs clean
	worstCPU float64 // largest CPU-time ratio vs clean
	worstM   float64 // largest memory ratio (max of allocated and peak) vs clean
}

// Slack for CI noise on top of 2× the clean run: a loaded shared machine
// stretches wall time (the CPU-time bound is the tight one), and GC timing
// moves the peak heap.
const (
	cpuSlack  = 300 * time.Millisecond
	wallSlack = 3 * time.Second
	memSlack  = 48 << 20
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (in *injector) check(kind, what string, run injectRun) {
	t := in.t
	t.Helper()
	c := in.counts[kind]
	if c == nil {
		c = new([4]int)
		in.counts[kind] = c
	}
	switch {
	case run.err != nil:
		c[3]++
	case run.res.Summary.Truncated:
		c[2]++
	case len(run.warnings) > 0:
		c[1]++
	default:
		c[0]++
	}
	what = in.name + ": " + kind + ": " + what
	if lim := 2*in.clean.cpu + cpuSlack; run.cpu > lim {
		t.Errorf("%s: took %v CPU, clean run %v (limit %v)", what, run.cpu, in.clean.cpu, lim)
	}
	if lim := 2*in.clean.dur + wallSlack; run.dur > lim {
		t.Errorf("%s: took %v, clean run %v (limit %v)", what, run.dur, in.clean.dur, lim)
	}
	if lim := 2*in.clean.alloc + memSlack; run.alloc > lim {
		t.Errorf("%s: allocated %d bytes, clean run %d (limit %d)", what, run.alloc, in.clean.alloc, lim)
	}
	if lim := 2*in.clean.peak + memSlack; run.peak > lim {
		t.Errorf("%s: peak heap %d bytes, clean run %d (limit %d)", what, run.peak, in.clean.peak, lim)
	}
	in.worstT = max(in.worstT, float64(run.dur)/float64(in.clean.dur))
	in.worstCPU = max(in.worstCPU, float64(run.cpu)/float64(in.clean.cpu))
	in.worstM = max(in.worstM, float64(run.alloc)/float64(in.clean.alloc), float64(run.peak)/float64(max(in.clean.peak, 1)))
	if run.err != nil && os.Getenv("INJECT_VERBOSE") != "" {
		t.Logf("%s: %v (%d samples)", what, run.err, run.samples)
	}
	if run.err != nil {
		msg := run.err.Error()
		switch {
		case run.samples > 0 && !strings.Contains(msg, "truncated"):
			t.Errorf("%s: failed after %d samples were decoded: %v", what, run.samples, run.err)
		case !strings.Contains(msg, "0x") && !isContentError(msg):
			t.Errorf("%s: error does not name an offset: %v", what, run.err)
		}
	}
	for _, w := range run.warnings {
		if !strings.Contains(w, "0x") {
			t.Errorf("%s: warning does not name an offset: %s", what, w)
		}
	}
	if run.res != nil && run.res.Summary.Truncated && len(run.res.Summary.Warnings) == 0 {
		t.Errorf("%s: truncated without a warning saying where", what)
	}
}

// isContentError: errors about what a (well-formed) recording contains,
// where no offset applies — a corrupt attr can legitimately turn a probe
// into an event of another type.
func isContentError(msg string) bool {
	return strings.Contains(msg, "describes no events") || strings.Contains(msg, "has no page-fault event") || strings.Contains(msg, "has no allocator entry probe") ||
		strings.Contains(msg, "an entry probe needs") || strings.Contains(msg, "a return probe needs") || strings.Contains(msg, "a free probe needs")
}

func (in *injector) report() {
	var kinds []string
	total := 0
	for k, c := range in.counts {
		n := c[0] + c[1] + c[2] + c[3]
		kinds = append(kinds, fmt.Sprintf("%s %d (%d/%d/%d/%d)", k, n, c[0], c[1], c[2], c[3]))
		total += n
	}
	sort.Strings(kinds)
	in.t.Logf("%s: %d runs (kind count (profile/with warnings/truncated or stopped/error)): %s; clean %v wall, %v CPU, %.1f MiB allocated, %.1f MiB peak heap; worst ratios: wall %.2f, CPU %.2f, memory %.2f",
		in.name, total, strings.Join(kinds, ", "), in.clean.dur.Round(time.Millisecond), in.clean.cpu.Round(time.Millisecond),
		float64(in.clean.alloc)/(1<<20), float64(in.clean.peak)/(1<<20), in.worstT, in.worstCPU, in.worstM)
}

// layout is where a recording keeps its parts.
type layout = perftest.Layout

func parseLayout(t *testing.T, p []byte) layout {
	l, err := perftest.ParseLayout(p)
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return l
}

func clone(p []byte) []byte { return append([]byte(nil), p...) }

func TestInjectFaults(t *testing.T) {
	fixtures := []string{"threads.plain.data", "threads.pipe.data", "basic.z.data"}
	if testing.Short() {
		fixtures = fixtures[2:]
	}
	for _, name := range fixtures {
		t.Run(strings.TrimSuffix(name, ".data"), func(t *testing.T) {
			p := perftest.ReadTestdata(t, "perf", name)
			injectFixture(t, name, p)
		})
	}
}

// injection is one recording under fault injection: the recording,
// its layout, the clean run's result and the draws the trials share.
type injection struct {
	t      *testing.T
	name   string
	p      []byte
	l      layout
	rng    *rand.Rand
	in     *injector
	cfg    symbolize.Config
	trials int
	bits   []uint
}

// injectFixture runs every kind of injected fault on recording p, in an
// order that keeps the random draws the same from run to run.
func injectFixture(t *testing.T, name string, p []byte) {
	cfg := cleanConfig()
	// The clean run twice: the first warms the file caches and the
	// runtime, the second is the reference.
	runBytes(t, "clean", p, cfg)
	clean := runBytes(t, "clean", p, cfg)
	if clean.err != nil {
		t.Fatalf("clean run: %v", clean.err)
	}
	in := &injector{t: t, name: name, clean: clean, counts: map[string]*[4]int{}}
	defer in.report()
	f := &injection{t: t, name: name, p: p, l: parseLayout(t, p), rng: rand.New(rand.NewPCG(7, uint64(len(p)))),
		in: in, cfg: cfg, trials: 16, bits: []uint{0, 1, 2, 3, 5, 7, 8, 10, 12, 13, 16, 19}}
	if testing.Short() {
		f.trials, f.bits = 3, []uint{2, 10, 13}
	}
	f.truncations(clean)
	f.flips()
	f.rounds()
	f.recordSizes()
	f.attrBits()
	f.binaries()
}

// truncations cuts the recording: inside the header, the attrs, at the data's start, at
// and just after record boundaries through the data, inside the
// feature section.
func (f *injection) truncations(clean injectRun) {
	t, name, p, l, rng, in, cfg, trials := f.t, f.name, f.p, f.l, f.rng, f.in, f.cfg, f.trials
	cuts := []int{0, 1, 8, 15, 16, 17, 40, 64, 103, 104}
	if !l.Pipe {
		cuts = append(cuts, l.AttrOff+1, l.AttrOff+l.AttrSize/2, l.AttrOff+l.AttrSize-1, l.DataOff, l.DataEnd+1, l.DataEnd+24, (l.DataEnd+len(p))/2, len(p)-1)
	}
	for i := range trials {
		rec := l.Records[(i*len(l.Records))/trials]
		cuts = append(cuts, rec, rec+3) // at a record, mid-record-header
		cuts = append(cuts, l.DataOff+rng.IntN(l.DataEnd-l.DataOff))
	}
	sort.Ints(cuts)
	prevFaults, prevCut := uint64(0), 0
	for _, cut := range cuts {
		if cut < 0 || cut >= len(p) {
			continue
		}
		run := runBytes(t, fmt.Sprintf("cut at %#x", cut), p[:cut], cfg)
		in.check("truncate", fmt.Sprintf("cut at %#x", cut), run)
		if run.res == nil {
			continue
		}
		s := &run.res.Summary
		// A pipe cut exactly between records looks like the stream's end.
		atBoundary := l.Pipe && slices.Contains(l.Records, cut)
		if cut < l.DataEnd && !atBoundary && !s.Truncated {
			t.Errorf("%s: cut at %#x inside the data: summary does not say truncated", name, cut)
		}
		if s.Tracker.Faults > clean.res.Summary.Tracker.Faults {
			t.Errorf("%s: cut at %#x: %d faults, more than the whole recording's %d", name, cut, s.Tracker.Faults, clean.res.Summary.Tracker.Faults)
		}
		if s.Tracker.Faults < prevFaults {
			t.Errorf("%s: cut at %#x: %d faults, fewer than the cut at %#x (%d)", name, cut, s.Tracker.Faults, prevCut, prevFaults)
		}
		prevFaults, prevCut = s.Tracker.Faults, cut
	}
}

// flips flips random bytes in the data section.
func (f *injection) flips() {
	t, p, l, rng, in, cfg, trials := f.t, f.p, f.l, f.rng, f.in, f.cfg, f.trials
	for i := range 2 * trials {
		q := clone(p)
		n := 1 + rng.IntN(8)
		for range n {
			q[l.DataOff+rng.IntN(l.DataEnd-l.DataOff)] ^= byte(1 + rng.IntN(255))
		}
		in.check("flip", fmt.Sprintf("trial %d (%d bytes)", i, n), runBytes(t, "flip", q, cfg))
	}
}

// rounds duplicates and swaps FINISHED_ROUND rounds. The fixtures have one
// or two rounds, so markers are first inserted every few records
// (rounds that claim an order the records may not have), then a round
// is duplicated or swapped with the next.
func (f *injection) rounds() {
	t, p, l, in, cfg, trials := f.t, f.p, f.l, f.in, f.cfg, f.trials
	var recs [][]byte
	for i, off := range l.Records {
		end := l.DataEnd
		if i+1 < len(l.Records) {
			end = l.Records[i+1]
		}
		recs = append(recs, p[off:end])
	}
	finished := []byte{68, 0, 0, 0, 0, 0, 8, 0}
	every := max(len(recs)/(2*trials), 1)
	var rounds [][][]byte
	var cur [][]byte
	for i, r := range recs {
		cur = append(cur, r)
		if binary.LittleEndian.Uint32(r) == 68 || (i > 8 && i%every == 0) {
			if binary.LittleEndian.Uint32(r) != 68 {
				cur = append(cur, finished)
			}
			rounds = append(rounds, cur)
			cur = nil
		}
	}
	rounds = append(rounds, cur)
	join := func(rs [][][]byte) []byte {
		var b []byte
		for _, r := range rs {
			for _, rec := range r {
				b = append(b, rec...)
			}
		}
		return b
	}
	in.check("round-insert", fmt.Sprintf("%d rounds", len(rounds)), runBytes(t, "round-insert", l.WithData(p, join(rounds)), cfg))
	for i := range trials {
		if len(rounds) < 6 {
			break // compressed: a handful of COMPRESSED2 records
		}
		// Skip the first rounds: in pipe mode they hold the attrs.
		k := 2 + (i*(len(rounds)-4))/trials
		dup := append(append(append([][][]byte{}, rounds[:k+1]...), rounds[k]), rounds[k+1:]...)
		in.check("round-dup", fmt.Sprintf("round %d", k), runBytes(t, "round-dup", l.WithData(p, join(dup)), cfg))
		swap := append([][][]byte{}, rounds...)
		swap[k], swap[k+1] = swap[k+1], swap[k]
		in.check("round-swap", fmt.Sprintf("rounds %d,%d", k, k+1), runBytes(t, "round-swap", l.WithData(p, join(swap)), cfg))
	}
}

// recordSizes makes record headers claim zero, too small, slightly and hugely
// oversized lengths.
func (f *injection) recordSizes() {
	t, p, l, in, cfg, trials := f.t, f.p, f.l, f.in, f.cfg, f.trials
	for i := range trials {
		off := l.Records[(i*len(l.Records))/trials]
		for _, size := range []uint16{0, 4, binary.LittleEndian.Uint16(p[off+6:]) + 8, 0xffff} {
			q := clone(p)
			binary.LittleEndian.PutUint16(q[off+6:], size)
			in.check("record-size", fmt.Sprintf("record at %#x size %d", off, size), runBytes(t, "record-size", q, cfg))
		}
	}
}

// attrBits makes attrs disagree with the samples: sample_type bits flipped.
func (f *injection) attrBits() {
	t, p, l, in, cfg := f.t, f.p, f.l, f.in, f.cfg
	var attrs []int // offsets of perf_event_attr.sample_type
	if l.Pipe {
		for _, off := range l.Records {
			if binary.LittleEndian.Uint32(p[off:]) == 64 { // HEADER_ATTR
				attrs = append(attrs, off+8+24)
			}
		}
	} else if l.AttrEntry > 0 {
		for off := l.AttrOff; off+l.AttrEntry <= l.AttrOff+l.AttrSize; off += l.AttrEntry {
			attrs = append(attrs, off+24)
		}
	}
	for _, at := range attrs {
		for _, bit := range f.bits {
			q := clone(p)
			binary.LittleEndian.PutUint64(q[at:], binary.LittleEndian.Uint64(q[at:])^1<<bit)
			in.check("attr-sample-type", fmt.Sprintf("attr at %#x bit %d", at, bit), runBytes(t, "attr", q, cfg))
		}
	}
}

// binaries makes the binaries missing, not the recorded build, malformed.
func (f *injection) binaries() {
	t, name, p, rng, in, trials := f.t, f.name, f.p, f.rng, f.in, f.trials
	empty := t.TempDir()
	in.check("symfs-missing", "empty symfs", runBytes(t, "empty symfs", p, rootedConfig(empty)))
	prog := "tmp/faultline-fixtures/bin/" + strings.Split(name, ".")[0]
	other := "tmp/faultline-fixtures/bin/launch"
	otherData, err := os.ReadFile(filepath.Join(symfsDir, other))
	if err != nil {
		t.Fatal(err)
	}
	mismatch := copySymfs(t, map[string][]byte{prog: otherData})
	run := runBytes(t, "build-id mismatch", p, rootedConfig(mismatch))
	in.check("symfs-buildid-mismatch", prog+" replaced by "+other, run)
	if run.res != nil && run.buildIDs > 0 && run.res.Summary.Unwind.Refused == 0 {
		t.Errorf("%s: a different binary at %s: no frame counted as refused", name, prog)
	}
	if run.res != nil && !strings.Contains(fmt.Sprint(run.res.Summary.Warnings), "is not the binary that ran") {
		if run.buildIDs > 0 {
			t.Errorf("%s: a different binary at %s gave no build-ID mismatch warning: %q", name, prog, run.res.Summary.Warnings)
		} else {
			t.Logf("%s: the recording lists no build IDs, so the replaced %s cannot be told apart", name, prog)
		}
	}

	libcPath := "usr/lib/x86_64-linux-gnu/libc.so.6"
	libc, err := os.ReadFile(filepath.Join(symfsDir, libcPath))
	if err != nil {
		t.Fatal(err)
	}
	progData, err := os.ReadFile(filepath.Join(symfsDir, prog))
	if err != nil {
		t.Fatal(err)
	}
	debugFiles, _ := filepath.Glob(filepath.Join(symfsDir, "usr/lib/debug/.build-id/*/*.debug"))
	if len(debugFiles) == 0 {
		t.Fatalf("committed fixture missing: no debug files under %s/usr/lib/debug/.build-id", symfsDir)
	}
	elfTrials := trials / 3
	for i := range elfTrials {
		for _, f := range []struct {
			path string
			data []byte
		}{{libcPath, libc}, {prog, progData}} {
			cut := []int{0, 16, 64, len(f.data) / 3, len(f.data) / 2, len(f.data) - 1}[i%6]
			dir := copySymfs(t, map[string][]byte{f.path: f.data[:cut]})
			in.check("elf-truncate", fmt.Sprintf("%s cut at %#x", f.path, cut), runBytes(t, "elf-truncate", p, rootedConfig(dir)))
			q := clone(f.data)
			for range 64 {
				q[rng.IntN(len(q))] ^= byte(1 + rng.IntN(255))
			}
			dir = copySymfs(t, map[string][]byte{f.path: q})
			in.check("elf-flip", fmt.Sprintf("%s trial %d", f.path, i), runBytes(t, "elf-flip", p, rootedConfig(dir)))
		}
		for _, df := range debugFiles {
			data, err := os.ReadFile(df)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(symfsDir, df)
			q := clone(data)
			for range 256 {
				q[rng.IntN(len(q))] ^= byte(1 + rng.IntN(255))
			}
			dir := copySymfs(t, map[string][]byte{rel: q})
			in.check("debug-flip", fmt.Sprintf("%s trial %d", rel, i), runBytes(t, "debug-flip", p, rootedConfig(dir)))
		}
	}
}

// rootedConfig finds binaries in dir as if it were the root file system, so
// neither the host's files (the fixtures' own /tmp paths, the host libc)
// nor a build-id cache can stand in for what the test put there.
func rootedConfig(dir string) symbolize.Config {
	return symbolize.Config{Locator: &binfile.Locator{FS: rootFS(dir), DebugDirs: []string{"/usr/lib/debug"}}}
}

type rootFS string

func (r rootFS) Open(name string) (binfile.File, error) {
	return os.Open(filepath.Join(string(r), name))
}

func (r rootFS) Stat(name string) (fs.FileInfo, error) {
	return os.Stat(filepath.Join(string(r), name))
}

// copySymfs makes a symfs of symlinks to the fixture's files, with the
// files named in replace (relative paths) written out with new contents.
func copySymfs(t *testing.T, replace map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(symfsDir)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.Walk(abs, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(abs, path)
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if data, ok := replace[rel]; ok {
			return os.WriteFile(dst, data, 0o755)
		}
		return os.Symlink(path, dst)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
