package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
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

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"github.com/faultline/faultline/perfdata"
)

// requireInproc skips a test of the in-process method where it cannot
// run: -short, not root (the uprobe method it is compared with needs
// root), no tracefs, no C compiler for the test programs.
func requireInproc(t *testing.T) string {
	t.Helper()
	requireLiveRecord(t)
	return buildRecordPrograms(t)
}

// callCounts reads a recording with our reader and counts the calls of
// each allocator entry point however the method spelled its events: the
// uprobe method's GROUP:malloc, the in-process method's faultline:malloc,
// malloc_short and malloc__call; aligned_alloc is counted as memalign
// (glibc's are one function, which the uprobe method probes once).
// It also counts, per process, the malloc calls of each size.
func callCounts(t *testing.T, path string) (calls map[string]uint64, bySize map[uint64]map[uint32]uint64, tids map[uint32]bool) {
	t.Helper()
	rd, err := perfdata.Open(path, &perfdata.Options{Order: perfdata.FileOrder})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	calls, bySize, tids = map[string]uint64{}, map[uint64]map[uint32]uint64{}, map[uint32]bool{}
	for rd.Next() {
		smp, ok := rd.Record().(*perfdata.Sample)
		if !ok || smp.Event == nil || smp.Event.Format == nil || smp.Event.Attr.SampleType&perfdata.SampleStackUser != 0 {
			continue
		}
		name := smp.Event.Format.Name
		if strings.HasSuffix(name, "__return") {
			continue
		}
		name = strings.TrimSuffix(strings.TrimSuffix(name, "__call"), "_short")
		if name == "aligned_alloc" {
			name = "memalign"
		}
		calls[name]++
		tids[smp.Tid] = true
		if name == "malloc" {
			if f := smp.Event.Format.Field("size"); f != nil {
				size, _ := f.Uint64(smp.Raw)
				if bySize[size] == nil {
					bySize[size] = map[uint32]uint64{}
				}
				bySize[size][smp.Pid]++
			}
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return calls, bySize, tids
}

// TestRecordInprocLiveLifecycle records testdata/record/src/lifecycle.c
// (threads, a signal handler, fork, vfork+exec, posix_spawn) with the
// in-process method, the default, and with uprobes: every entry point's
// calls are equal, except the frees glibc makes for exiting threads
// without going through the PLT (the shim cannot see them; they free
// blocks the program had already freed into the thread's cache); every
// process's calls are there, each in a process of its own.
func TestRecordInprocLiveLifecycle(t *testing.T) {
	progs := requireInproc(t)
	dir := t.TempDir()
	in, up := filepath.Join(dir, "inproc.data"), filepath.Join(dir, "uprobe.data")
	prog := filepath.Join(progs, "lifecycle")
	t.Setenv("FAULTLINE_DEBUG_SHIM", "1") // the shim's counters
	code, stderr := runRecordMain("-o", in, "--", prog)
	t.Logf("in-process:\n%s", stderr)
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stderr, "in-process") {
		t.Errorf("record did not say it recorded in-process")
	}
	// Each thread's ring is populated 256 KiB at a time as it fills: the
	// 68 threads (main, 64 workers, the three children) each write under
	// 256 KiB of records, so the region holds their rings' headers and
	// first steps and the control block, where whole 2 MiB rings would
	// take 68 × 2 MiB = 136 MiB. Four rings to spare.
	m := regexp.MustCompile(`Resident:(\d+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatal("no Resident in the shim's counters")
	}
	const rings, step = 68 + 4, 4096 + 256<<10
	if n, _ := strconv.ParseUint(m[1], 10, 64); n == 0 || n > rings*step+16384 {
		t.Errorf("the rings hold %s bytes of memory, want at most %d (%d rings of %d)", m[1], rings*step+16384, rings, step)
	}
	code, stderr = runRecordMain("--method", "uprobe", "-o", up, "--", prog)
	t.Logf("uprobes:\n%s", stderr)
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	ci, sizes, tids := callCounts(t, in)
	cu, _, _ := callCounts(t, up)
	for _, fn := range []string{"malloc", "calloc", "realloc", "memalign", "posix_memalign"} {
		if ci[fn] != cu[fn] || ci[fn] == 0 {
			t.Errorf("%s: in-process %d calls, uprobes %d", fn, ci[fn], cu[fn])
		}
	}
	// glibc's tcache_thread_shutdown frees each exiting thread's cached
	// chunks directly: at most 64 bins of 7, and the cache itself.
	const threads = 64
	if ci["free"] > cu["free"] || cu["free"]-ci["free"] > threads*(64*7+1) {
		t.Errorf("free: in-process %d, uprobes %d: more than the %d exiting threads' caches apart", ci["free"], cu["free"], threads)
	}
	t.Logf("frees: in-process %d, uprobes %d (%d thread-exit frees unseen)", ci["free"], cu["free"], cu["free"]-ci["free"])
	if len(tids) < threads+4 {
		t.Errorf("calls from %d threads, want at least %d (main, %d workers, 3 children)", len(tids), threads+4, threads)
	}
	// lifecycle.c: main 100 × 1000 B, the signal handler 1 × 777 B, the
	// forked child 20 × 2000 B, the exec'd one 30 × 3000 B, the spawned
	// one 40 × 4000 B, each in a process of its own.
	pids := map[uint32]bool{}
	for size, want := range map[uint64]uint64{1000: 100, 777: 1, 2000: 20, 3000: 30, 4000: 40} {
		if len(sizes[size]) != 1 {
			t.Errorf("malloc(%d) in %d processes, want 1: %v", size, len(sizes[size]), sizes[size])
			continue
		}
		for pid, n := range sizes[size] {
			if n != want {
				t.Errorf("malloc(%d): %d calls, want %d", size, n, want)
			}
			if size != 777 {
				pids[pid] = true
			}
		}
	}
	if len(pids) != 4 {
		t.Errorf("the main process and its three children are %d processes in the recording, want 4", len(pids))
	}
}

// TestRecordInprocLiveOperatorNew records testdata/record/src/cxxnew.cpp
// (every path of operator new: 0 bytes, new[], nothrow, bad_alloc, a
// new-handler) both ways. The shim stands in for libstdc++'s operator new
// and new[]: the program runs as it does without it (its own checks pass,
// exit 0), the malloc calls are the uprobe method's size for size (the
// counts cxxnew.cpp's comment derives), and the calls made straight from
// main are written without stack words (malloc_short or malloc__call), the
// program's return address being their site.
func TestRecordInprocLiveOperatorNew(t *testing.T) {
	progs := requireInproc(t)
	in, up := recordBothWays(t, filepath.Join(progs, "cxxnew"))
	ci, si, _ := callCounts(t, in)
	cu, su, _ := callCounts(t, up)
	if ci["malloc"] != cu["malloc"] || ci["free"] != cu["free"] {
		t.Errorf("in-process %d mallocs and %d frees, uprobes %d and %d", ci["malloc"], ci["free"], cu["malloc"], cu["free"])
	}
	const news = 100 // cxxnew.cpp's NEWS
	for size, want := range map[uint64]uint64{1: 3 * news, 40: news, 48: news, 56: news, 64: news, 1 << 62: 5 * news} {
		if got, gotUp := sum(si[size]), sum(su[size]); got != want || gotUp != want {
			t.Errorf("malloc(%d): in-process %d calls, uprobes %d; cxxnew.cpp makes %d", size, got, gotUp, want)
		}
	}
	// new char[40] and new s48 are made from main: their return address
	// is the program's, so no stack words, but for the 1 in 61 that carry
	// a stack (written as the entry with its words, and its stack sample).
	short, stacked := map[uint64]uint64{}, map[uint64]uint64{}
	rd, err := perfdata.Open(in, &perfdata.Options{Order: perfdata.FileOrder})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for rd.Next() {
		smp, ok := rd.Record().(*perfdata.Sample)
		if !ok || smp.Event == nil || smp.Event.Format == nil {
			continue
		}
		f := smp.Event.Format.Field("size")
		if f == nil {
			continue
		}
		size, _ := f.Uint64(smp.Raw)
		switch name := smp.Event.Format.Name; {
		case smp.Event.Attr.SampleType&perfdata.SampleStackUser != 0:
			stacked[size]++
		case name == "malloc__call" || name == "malloc_short":
			short[size]++
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	for _, size := range []uint64{40, 48} {
		if short[size]+stacked[size] != news || short[size] < news/2 {
			t.Errorf("malloc(%d) from main: %d of %d calls written without stack words, %d with a stack", size, short[size], news, stacked[size])
		}
	}
}

// TestRecordInprocLiveDlopenCxx records testdata/record/src/dlopener.c
// loading cxxplugin.cpp with dlopen — against the shared libstdc++, and
// with libstdc++ linked into the library — both ways. The library's calls
// of operator new bind to the shim's, whose next definition RTLD_NEXT
// cannot see (the library is not in the global scope): the program still
// runs as without the shim (exit 0: its bad_alloc is caught), and its
// malloc calls are the uprobe method's size for size (cxxplugin.cpp's 50
// of 100 and 50 of 24 bytes, one refused).
func TestRecordInprocLiveDlopenCxx(t *testing.T) {
	progs := requireInproc(t)
	for _, lib := range []string{"libcxxplugin.so", "libcxxplugin-static.so"} {
		t.Run(lib, func(t *testing.T) {
			in, up := recordBothWays(t, filepath.Join(progs, "dlopener"), filepath.Join(progs, lib))
			_, si, _ := callCounts(t, in)
			_, su, _ := callCounts(t, up)
			for size, want := range map[uint64]uint64{100: 50, 24: 50, 1 << 62: 1} {
				if got := sum(si[size]); got != want {
					t.Errorf("malloc(%d): %d calls in-process, cxxplugin.cpp makes %d", size, got, want)
				}
			}
			for size, m := range su {
				if sum(si[size]) != sum(m) {
					t.Errorf("malloc(%d): in-process %d calls, uprobes %d", size, sum(si[size]), sum(m))
				}
			}
			if len(si) != len(su) {
				t.Errorf("in-process malloc sizes %d, uprobes %d", len(si), len(su))
			}
		})
	}
}

// recordBothWays records argv with the in-process method (the default)
// and with uprobes, -q, into a test directory: the two recordings.
func recordBothWays(t *testing.T, argv ...string) (in, up string) {
	t.Helper()
	dir := t.TempDir()
	in, up = filepath.Join(dir, "inproc.data"), filepath.Join(dir, "uprobe.data")
	if code, stderr := runRecordMain(append([]string{"-q", "--method", "inproc", "-o", in, "--"}, argv...)...); code != ExitOK {
		t.Fatalf("in-process: exit %d\n%s", code, stderr)
	}
	// The reference's stacks (32 KiB each, copied by the kernel) get a
	// ring four times the default, as the 8 KiB copies had, and its
	// calls and faults (the memory-map calls carry 32 KiB stacks too)
	// four times theirs, so that a loaded machine does not make it lose
	// them.
	if code, stderr := runRecordMain(append([]string{"-q", "--method", "uprobe", "--stack-mmap-pages", "4096", "-m", "16384", "-o", up, "--"}, argv...)...); code != ExitOK {
		t.Fatalf("uprobes: exit %d\n%s", code, stderr)
	}
	return in, up
}

func sum(m map[uint32]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}

// summarySites runs analyze on a recording and reads its site table: faults
// per site text.
func summarySites(t *testing.T, data string) map[string]int64 {
	t.Helper()
	return parseSites(analyzeText(t, data))
}

// analyzeText runs analyze on a recording (the profile next to it) and
// returns its summary.
func analyzeText(t *testing.T, data string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
	if code := Main([]string{"analyze", "-o", data + ".pb.gz", data}, env); code != ExitOK {
		t.Fatalf("analyze %s: exit %d\n%s", data, code, stderr.String())
	}
	t.Logf("analyze %s:\n%s", filepath.Base(data), stdout.String())
	return stdout.String()
}

// parseSites reads analyze's site table: faults per site text.
func parseSites(summary string) map[string]int64 {
	sites := map[string]int64{}
	row := regexp.MustCompile(`^\s+(\d+)\s+(\d+)\s+[\d.]+ \S+\s+\S+\s+(.+)$`)
	inTable := false
	sc := bufio.NewScanner(strings.NewReader(summary))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Top allocation sites by faults:") {
			inTable = true
			continue
		}
		if m := row.FindStringSubmatch(line); inTable && m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			sites[m[3]] += n
		}
	}
	return sites
}

// siteSlack is how far a site's faults may differ between the in-process
// and the uprobe recordings of one program: 0.5%, and for the memory the
// program mapped itself (sites "… (via mmap)") one page more. The
// dynamic loader keeps its own bookkeeping in mmapped pages, and a
// preloaded library (the shim) moves it: recorded with uprobes, the
// containers program took 13 faults there alone and 14 with libpthread or
// libz in LD_PRELOAD (13 with libdl, whose path is shorter).
func siteSlack(site string, n int64) float64 {
	if strings.HasSuffix(site, "(via mmap)") {
		return 1 + 0.005*float64(n)
	}
	return 0.005 * float64(n)
}

// TestRecordInprocLiveContainers records the C++ containers program
// (testdata/record/src/containers.cpp: operator new, std::string, two
// threads) both ways: the sites and their faults agree within 0.5%, the
// in-process recording is no larger than the uprobe one, and faultline
// diff of the two profiles passes. A third recording takes a stack at
// every call: the default one's sites are the same.
func TestRecordInprocLiveContainers(t *testing.T) {
	progs := requireInproc(t)
	prog := filepath.Join(progs, "containers")
	in, up := recordBothWays(t, prog)
	every := filepath.Join(t.TempDir(), "every.data")
	if code, stderr := runRecordMain("-q", "--stack-every", "1", "-o", every, "--", prog); code != ExitOK {
		t.Fatalf("in-process, a stack for every call: exit %d\n%s", code, stderr)
	}
	ti := analyzeText(t, in)
	si, su, se := parseSites(ti), summarySites(t, up), summarySites(t, every)
	t.Logf("in-process sites: %v\nuprobe sites: %v\nevery call with a stack: %v", si, su, se)
	// A recording that lost samples (counted: the recorder fell behind the
	// program, as on a loaded machine) has fewer sites and faults; say so
	// rather than compare its sites.
	for _, data := range []string{in, up, every} {
		var lost []string
		for _, ev := range recordedEvents(t, data) {
			if ev.Lost > 0 {
				lost = append(lost, fmt.Sprintf("%s %d of %d", ev.Name, ev.Lost, ev.Samples+ev.Lost))
			}
		}
		if len(lost) > 0 {
			t.Fatalf("%s lost samples, counted (%s): the recorder fell behind the program; the sites of recordings with losses cannot be compared", filepath.Base(data), strings.Join(lost, ", "))
		}
	}
	// The default recording (a stack for 1 in 61 small calls, the rest
	// joined by their leaf) names the sites that stacks on every call name.
	for site, n := range se {
		if m := si[site]; math.Abs(float64(m-n)) > 0.005*float64(n) {
			t.Errorf("%s: %d faults in the default recording, %d with a stack on every call", site, m, n)
		}
	}
	if len(su) < 5 {
		t.Fatalf("the uprobe recording has %d sites; want containers.cpp's", len(su))
	}
	// The program's own mappings (via mmap) are compared where both
	// methods see the call: the syscall tracepoints also see the C
	// library's own mmaps (thread stacks, the loader's), which bypass the
	// wrappers the shim interposes. In-process, the kernel's mmap records
	// show those mappings, and analyze counts their faults (unattributed:
	// no call's stack names them): at least the uprobe recording's there,
	// a page per mapping aside (siteSlack).
	var unseen, unseenSites int64
	for site, n := range su {
		m := si[site]
		if m == 0 && strings.HasSuffix(site, "(via mmap)") {
			t.Logf("%s: %d faults with uprobes; the C library's own mapping, not seen in-process", site, n)
			unseen += n
			unseenSites++
			continue
		}
		if math.Abs(float64(m-n)) > siteSlack(site, n) {
			t.Errorf("%s: in-process %d faults, uprobes %d", site, m, n)
		}
	}
	if unseen > 0 {
		m := regexp.MustCompile(`(\d+) faults \(unattributed\) in (\d+) anonymous mappings no recorded call made`).FindStringSubmatch(ti)
		if m == nil {
			t.Errorf("in-process: %d faults in the C library's own mappings with uprobes; analyze does not count them", unseen)
		} else if n, _ := strconv.ParseInt(m[1], 10, 64); n+unseenSites < unseen {
			t.Errorf("in-process: %d faults in mappings only the kernel showed; the uprobe recording has %d in the C library's own mappings", n, unseen)
		}
	}
	fi, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	fu, err := os.Stat(up)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sizes: in-process %d, uprobes %d bytes", fi.Size(), fu.Size())
	if fi.Size() > fu.Size() {
		t.Errorf("the in-process recording (%d bytes) is larger than the uprobe one (%d)", fi.Size(), fu.Size())
	}
	// The program asks for the same bytes whichever way it is recorded
	// (to within a start-up allocation or two: 16 of 16.7 MB seen): a
	// size misread from a ring (terabytes) shows here first.
	// (The program's mappings aside: see above.)
	if bi, bu := profileTotal(t, in+".pb.gz", report.SampleAllocSpace), profileTotal(t, up+".pb.gz", report.SampleAllocSpace); math.Abs(float64(bi-bu)) > 0.001*float64(bu) {
		t.Errorf("alloc_space: in-process %d bytes, uprobes %d", bi, bu)
	}
	var stdout, stderr bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
	if code := Main([]string{"diff", up + ".pb.gz", in + ".pb.gz"}, env); code != ExitOK {
		t.Errorf("diff of the two methods' profiles: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// profileTotal sums the values of the sample type typ in the profile at
// path, but for the program's own mappings (via mmap).
func profileTotal(t *testing.T, path, typ string) int64 {
	t.Helper()
	p := reporttest.Read(t, path)
	i := report.ValueIndex(p, typ)
	if i < 0 {
		t.Fatalf("%s: no sample type %s", path, typ)
	}
	var sum int64
	for _, s := range p.Sample {
		if slices.Contains(s.Label[report.ViaLabel], "mmap") {
			continue // a mapping the program made, not an allocation
		}
		sum += s.Value[i]
	}
	return sum
}

// TestRecordInprocLivePerfReads checks that perf reads an in-process
// recording: perf script prints every sample our reader counts, and perf
// report --stats finds no lost or unknown records.
func TestRecordInprocLivePerfReads(t *testing.T) {
	progs := requireInproc(t)
	perf := requirePerf(t)
	data := filepath.Join(t.TempDir(), "churn.data")
	if code, stderr := runRecordMain("-q", "-o", data, "--", filepath.Join(progs, "churn"), "20000"); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	// perf prints a packed sample once; our reader delivers the samples
	// it holds.
	st := readStats(t, data)
	total := st.Samples - st.Unpacked + st.Packed
	out, err := exec.Command(perf, "script", "-i", data, "-F", "event").Output()
	if err != nil {
		t.Fatalf("perf script: %v", err)
	}
	if n := uint64(bytes.Count(out, []byte("\n"))); n != total || st.Packed == 0 {
		t.Errorf("perf script printed %d samples, our reader counts %d (%d packed samples)", n, total, st.Packed)
	}
	stats, err := exec.Command(perf, "report", "--stats", "-i", data).CombinedOutput()
	if err != nil {
		t.Fatalf("perf report --stats: %v\n%s", err, stats)
	}
	for _, bad := range []string{"LOST", "unknown", "Warning"} {
		if bytes.Contains(stats, []byte(bad)) {
			t.Errorf("perf report --stats mentions %q:\n%s", bad, stats)
		}
	}
	if !bytes.Contains(stats, []byte("faultline:packed stats")) {
		t.Errorf("perf report --stats does not list the packed calls:\n%s", stats)
	}
}

// TestRecordInprocLiveStaticFallsBack checks that a statically linked
// program, which nothing can be preloaded into, is recorded with uprobes
// on the program itself and that record says why.
func TestRecordInprocLiveStaticFallsBack(t *testing.T) {
	requireLiveRecord(t)
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "s.c")
	os.WriteFile(src, []byte("#include <stdlib.h>\nint main(void){char *volatile p = malloc(100000); p[0] = 1; free(p); return 0;}\n"), 0o644)
	bin := filepath.Join(dir, "s")
	if out, err := exec.Command(cc, "-static", "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("no static libc to link with: %v\n%s", err, out)
	}
	code, stderr := runRecordMain("--libc", bin, "-o", filepath.Join(dir, "s.data"), "--", bin)
	t.Logf("%s", stderr)
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	s2 := filepath.Join(dir, "s2.data")
	code, stderr = runRecordMain("-o", s2, "--", bin)
	t.Logf("%s", stderr)
	if !strings.Contains(stderr, "statically linked") || !strings.Contains(stderr, "uprobes") {
		t.Errorf("record did not say it falls back to uprobes for a static program (exit %d)", code)
	}
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	// The program's one malloc(100000) is there (probed in the program).
	_, sizes, _ := callCounts(t, s2)
	if len(sizes[100000]) != 1 {
		t.Errorf("malloc(100000) seen in %d processes, want 1", len(sizes[100000]))
	}
}

// buildFaultline builds the faultline command, once per test process, for
// tests that need record as a process of its own (to stop or kill it).
func buildFaultline(t *testing.T) string {
	t.Helper()
	return buildOnce(t, "faultline", func(bin string) *exec.Cmd {
		return exec.Command("go", "build", "-o", bin, "github.com/faultline/faultline/cmd/faultline")
	})
}

// TestRecordInprocLiveStuckRecorder stops record (SIGSTOP) while the
// program allocates: the program's threads wait for room in their rings
// at most --shim-wait, then run on unrecorded; when record resumes it
// finishes the file and says from when the calls are missing.
func TestRecordInprocLiveStuckRecorder(t *testing.T) {
	progs := requireInproc(t)
	bin := buildFaultline(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "stuck.data")
	cmd := exec.Command(bin, "record", "--shim-wait", "1s", "-o", data, "--", filepath.Join(progs, "churn"), "3000000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Stop record once the program runs (its child named churn).
	waitChild(t, cmd.Process.Pid, "churn")
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(3 * time.Second)
	cmd.Process.Signal(syscall.SIGCONT)
	err := cmd.Wait()
	t.Logf("record:\n%s", stderr.String())
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	if !strings.Contains(stderr.String(), "ran on unrecorded") {
		t.Errorf("record did not say the program ran on unrecorded")
	}
	if !strings.Contains(stderr.String(), "the cause: record was stopped (SIGSTOP, Ctrl-Z)") {
		t.Errorf("record did not name being stopped as the cause")
	}
	calls, _, _ := callCounts(t, data)
	if calls["malloc"] == 0 || calls["malloc"] >= 3000000 {
		t.Errorf("%d mallocs recorded: want some, and fewer than the program's 3000000", calls["malloc"])
	}
}

// TestRecordInprocLiveStalledPipe: recording to a pipe whose reader
// waits 3 s before it reads, the program waits past --shim-wait 1s and
// runs on unrecorded; record names the blocked output as the cause, and
// the remedy (a file), not a stop or a starved CPU.
func TestRecordInprocLiveStalledPipe(t *testing.T) {
	progs := requireInproc(t)
	bin := buildFaultline(t)
	c := exec.Command("sh", "-c", `"$0" record --shim-wait 1s -o - -- "$1" 3000000 | (sleep 3; cat >/dev/null)`, bin, filepath.Join(progs, "churn"))
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ran on unrecorded") || !strings.Contains(string(out), "the cause: writing the recording to standard output blocked") {
		t.Errorf("record did not name the stalled output:\n%s", out)
	}
}

// TestRecordInprocLiveWithoutCompiler builds faultline as `go install`
// would on a machine without a C compiler (PATH holds only the go
// command: cgo is then off) and records with it: the embedded shim makes
// the in-process method work all the same.
//
// The build is made once per test process and uses the go command's
// build cache. The cache cannot stand in for a C compiler: a package's
// cache key holds its list of cgo files and, when it has any, the C
// compiler's identity, and with cgo off no package of the build has cgo
// files (a file that imports "C" is left out), so every result the build
// reuses was compiled by the Go toolchain alone from the same inputs; a
// build that failed is never cached. `go version -m` then reads from the
// binary the settings it was built with: CGO_ENABLED=0.
func TestRecordInprocLiveWithoutCompiler(t *testing.T) {
	progs := requireInproc(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	goBin, _ = filepath.EvalSymlinks(goBin)
	goDir := filepath.Dir(goBin)
	if _, err := os.Stat(filepath.Join(goDir, "gcc")); err == nil {
		t.Skipf("%s holds gcc too: cannot hide the compiler", goDir)
	}
	env := []string{"PATH=" + goDir, "HOME=" + os.Getenv("HOME"), "GOCACHE=" + goEnv(t, "GOCACHE"),
		"GOPATH=" + os.Getenv("GOPATH"), "GOMODCACHE=" + goEnv(t, "GOMODCACHE"), "GOFLAGS=-mod=mod", "GOPROXY=off"}
	bin := buildOnce(t, "faultline-without-cc", func(bin string) *exec.Cmd {
		build := exec.Command(goBin, "build", "-buildvcs=false", "-o", bin, "github.com/faultline/faultline/cmd/faultline")
		build.Env = env
		return build
	})
	info, err := exec.Command(goBin, "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", bin, err)
	}
	if !bytes.Contains(info, []byte("\tbuild\tCGO_ENABLED=0\n")) {
		t.Errorf("go version -m: the faultline built without a C compiler was not built with cgo off:\n%s", info)
	}
	data := filepath.Join(t.TempDir(), "x.data")
	out, err := exec.Command(bin, "record", "-o", data, "--", filepath.Join(progs, "churn"), "1000").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	if !strings.Contains(string(out), "in-process") {
		t.Errorf("a faultline built without a C compiler did not record in-process")
	}
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// childRuns reports whether a process named comm runs below ppid.
func childRuns(ppid int, comm string) bool { return childPid(ppid, comm) != 0 }

// waitChild waits up to 30 s for a process named comm below ppid.
func waitChild(t *testing.T, ppid int, comm string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !childRuns(ppid, comm) {
		if time.Now().After(deadline) {
			t.Fatalf("the program %s did not start within 30 s", comm)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRecordInprocLiveKilledRecorder kills record (SIGKILL) while the
// program runs in-process: the program does not run on by itself (the
// kernel's parent-death signal ends it), whatever its rings hold.
func TestRecordInprocLiveKilledRecorder(t *testing.T) {
	progs := requireInproc(t)
	bin := buildFaultline(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "record", "-q", "-o", filepath.Join(dir, "k.data"), "--", filepath.Join(progs, "churn"), "50000000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitChild(t, cmd.Process.Pid, "churn")
	prog := childPid(cmd.Process.Pid, "churn")
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Kill()
	cmd.Wait()
	if !processGone(prog) {
		syscall.Kill(prog, syscall.SIGKILL)
		t.Fatalf("the program (pid %d) still runs 5 s after record was killed", prog)
	}
}

// childPid returns the pid of a process named comm below ppid (record's
// program is its guard's child), or 0.
func childPid(ppid int, comm string) int {
	for _, pid := range descendantPids(ppid) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && bytes.HasSuffix(b[:i], []byte("("+comm)) {
			return pid
		}
	}
	return 0
}

// TestRecordInprocLiveClock records testdata/record/src/clocks.c, whose
// threads read CLOCK_MONOTONIC around each malloc and free, once with
// the shim stamping calls from the TSC and once with clock_gettime: each
// call's stamps lie between the program's own readings around it, and
// each thread's stamps never go back. From the TSC a stamp may be off by
// half the time between the two TSC reads around the shim's last reading of
// CLOCK_MONOTONIC (it uses none further apart than 200 ns) and by the
// rate's error over the 20 µs it converts for (shim/csrc/clock.c): the
// test allows 110 ns. With clock_gettime it allows nothing. A third run
// has the program make RDTSC fault in its threads first (prctl
// PR_SET_TSC), as a sandbox might: it must run as usual, and the shim
// reads CLOCK_MONOTONIC for every stamp from then on.
func TestRecordInprocLiveClock(t *testing.T) {
	progs := requireInproc(t)
	for _, c := range []struct {
		clock string
		slack uint64
		notsc bool // the program makes RDTSC fault first (prctl)
	}{{"tsc", 110, false}, {"monotonic", 0, false}, {"tsc", 110, true}} {
		name := c.clock
		if c.notsc {
			name += "-prctl"
		}
		t.Run(name, func(t *testing.T) {
			if ok, why := shim.TSCUsable(); c.clock == "tsc" && !ok {
				t.Skipf("the shim would not use the TSC here: %s", why)
			}
			if c.notsc {
				// Where the vDSO's clock_gettime reads the TSC itself,
				// a program that made RDTSC fault dies at its next clock
				// read with or without the shim.
				cmd := exec.Command(filepath.Join(progs, "clocks"), filepath.Join(t.TempDir(), "native.txt"), "notsc")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Skipf("clocks notsc fails on its own here (%v: %s): this machine's clock_gettime reads the TSC, so no program can read the clock after disabling RDTSC", err, out)
				}
			}
			dir := t.TempDir()
			data, calls := filepath.Join(dir, "clock.data"), filepath.Join(dir, "calls.txt")
			t.Setenv("FAULTLINE_DEBUG_SHIM", "1") // the shim's counters
			argv := []string{"-v", "--shim-clock", c.clock, "-o", data, "--", filepath.Join(progs, "clocks"), calls}
			if c.notsc {
				argv = append(argv, "notsc")
			}
			code, stderr := runRecordMain(argv...)
			t.Logf("%s", stderr)
			if code != ExitOK {
				t.Fatalf("exit %d", code)
			}
			if c.clock == "tsc" && !strings.Contains(stderr, "from the CPU's time-stamp counter") || strings.Contains(stderr, "disagreed") {
				t.Errorf("record did not set the shim to the TSC, or the TSC jumped")
			}
			n := checkClockStamps(t, data, calls, c.slack)
			// A malloc's entry and return and a free read the clock
			// once each without the TSC: 3n reads. With it most stamps
			// come from the counter: a thread reads the clock for every
			// stamp only until the process knows the counter's rate
			// (2 ms), then once per 20 µs, up to three times when the
			// pair is not tight (shim/csrc/clock.c); how many calls the
			// first 2 ms hold depends on the machine (15,000-29,000
			// reads for 80,000 pairs on a 2-vCPU Intel VM), so the
			// bound is one read per three stamps, n.
			m := regexp.MustCompile(`ClockReads:(\d+)`).FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("no ClockReads in the shim's counters")
			}
			reads, _ := strconv.Atoi(m[1])
			t.Logf("%d pairs of calls, %d reads of CLOCK_MONOTONIC", n, reads)
			// After the program's prctl(PR_SET_TSC) the shim reads the
			// clock for every stamp, as without the TSC.
			tsc := c.clock == "tsc" && !c.notsc
			if tsc && reads > n || !tsc && reads < 3*n {
				t.Errorf("%d reads of CLOCK_MONOTONIC for %d pairs of calls with --shim-clock %s", reads, n, c.clock)
			}
		})
	}
}

// checkClockStamps compares the stamps of a recording of clocks.c with
// the readings it wrote to calls, and returns how many malloc and free
// pairs it compared.
func checkClockStamps(t *testing.T, data, calls string, slack uint64) int {
	t.Helper()
	type window struct{ lo, hi uint64 }
	type key struct {
		tid  uint32
		size uint64
	}
	mallocs, frees := map[key][]window{}, map[uint32][]window{}
	sizeOf := map[uint32]uint64{}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		var tid uint32
		var size uint64
		var k int
		var before, mid, after uint64
		if _, err := fmt.Sscan(line, &tid, &size, &k, &before, &mid, &after); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		mallocs[key{tid, size}] = append(mallocs[key{tid, size}], window{before, mid})
		frees[tid] = append(frees[tid], window{mid, after})
		sizeOf[tid] = size
	}
	rd, err := perfdata.Open(data, &perfdata.Options{Order: perfdata.FileOrder})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	last := map[uint32]uint64{}
	nm, nf := map[key]int{}, map[uint32]int{}
	// open: the malloc whose free comes next on the thread, or -1 (the
	// thread's own calls are written in their order; glibc frees some
	// blocks of an exiting thread through the PLT after its last call).
	open := map[uint32]int{}
	var worst int64
	outside := 0
	inside := func(what string, tid uint32, k int, ts uint64, w window) {
		if ts+slack < w.lo || ts > w.hi+slack {
			t.Errorf("thread %d, %s %d: stamped %d, outside the program's readings [%d, %d] by more than %d ns", tid, what, k, ts, w.lo, w.hi, slack)
		}
		if ts < w.lo || ts > w.hi {
			outside++
		}
		worst = max(worst, int64(w.lo)-int64(ts), int64(ts)-int64(w.hi))
	}
	for rd.Next() {
		smp, ok := rd.Record().(*perfdata.Sample)
		if !ok || smp.Event == nil || smp.Event.Format == nil || smp.Event.Attr.SampleType&perfdata.SampleStackUser != 0 {
			continue
		}
		size, ours := sizeOf[smp.Tid]
		if !ours || smp.Event.Format.System != "faultline" {
			continue
		}
		if smp.Time < last[smp.Tid] {
			t.Errorf("thread %d: a stamp %d after %d", smp.Tid, smp.Time, last[smp.Tid])
		}
		last[smp.Tid] = smp.Time
		name := smp.Event.Format.Name
		switch {
		case name == "free":
			if k, ok := open[smp.Tid]; ok && k >= 0 && k < len(frees[smp.Tid]) {
				inside("free", smp.Tid, k, smp.Time, frees[smp.Tid][k])
				nf[smp.Tid]++
			}
			open[smp.Tid] = -1
		case strings.HasPrefix(name, "malloc"):
			f := smp.Event.Format.Field("size")
			if f == nil { // a return: the call's, counted at its entry
				k := nm[key{smp.Tid, size}] - 1
				if w := mallocs[key{smp.Tid, size}]; k >= 0 && k < len(w) && smp.Event.Format.Field("ptr") != nil {
					inside("malloc return", smp.Tid, k, smp.Time, w[k])
				}
				continue
			}
			if s, _ := f.Uint64(smp.Raw); s != size {
				continue
			}
			k := nm[key{smp.Tid, size}]
			if w := mallocs[key{smp.Tid, size}]; k < len(w) {
				inside("malloc", smp.Tid, k, smp.Time, w[k])
			}
			nm[key{smp.Tid, size}]++
			open[smp.Tid] = k
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	for k, w := range mallocs {
		if nm[k] != len(w) {
			t.Errorf("thread %d: %d calls of malloc(%d) recorded, the program made %d", k.tid, nm[k], k.size, len(w))
		}
	}
	for tid, w := range frees {
		if nf[tid] != len(w) {
			t.Errorf("thread %d: %d frees recorded, the program made %d", tid, nf[tid], len(w))
		}
	}
	t.Logf("%d stamps outside the program's readings; the farthest by %d ns (negative: inside)", outside, worst)
	n := 0
	for _, k := range nf {
		n += k
	}
	return n
}

// TestRecordInprocLiveRawMaps records testdata/record/src/rawmaps.c both
// ways: memory mapped without the C library's mmap wrapper — a raw
// syscall(SYS_mmap) of 64 pages each written once, a thread's stack
// (glibc maps it itself) of which the thread writes 32 pages, and a 4 MiB
// malloc glibc maps itself. The syscall tracepoints see every call: the
// uprobe recording gives the 64 faults to raw_region's mapping and the
// thread's to main's (pthread_create's). In-process, the shim sees no
// call; the kernel's mmap records show the mappings, and analyze counts
// their faults (as many as the uprobe recording's there, at least) and
// says so. The malloc's faults are its site's either way.
func TestRecordInprocLiveRawMaps(t *testing.T) {
	progs := requireInproc(t)
	in, up := recordBothWays(t, filepath.Join(progs, "rawmaps"))
	ti, tu := analyzeText(t, in), analyzeText(t, up)
	si, su := parseSites(ti), parseSites(tu)
	const rawPages, stackPages, bigPages = 64, 32, 4 << 20 / 4096 // rawmaps.c's RAW_PAGES, STACK_PAGES, BIG / 4096
	var raw, stack, big, bigIn int64
	for site, n := range su {
		switch {
		case strings.HasPrefix(site, "raw_region ") && strings.HasSuffix(site, "(via mmap)"):
			raw += n
		case strings.HasPrefix(site, "main ") && strings.HasSuffix(site, "(via mmap)"):
			stack += n
		case strings.HasPrefix(site, "big_block "):
			big += n
			bigIn += si[site]
		}
	}
	if raw != rawPages {
		t.Errorf("uprobes: raw_region's mapping took %d faults, want %d", raw, rawPages)
	}
	if stack < stackPages {
		t.Errorf("uprobes: the thread's stack (main's mapping) took %d faults, want at least %d", stack, stackPages)
	}
	if big < bigPages || math.Abs(float64(bigIn-big)) > 0.005*float64(big) {
		t.Errorf("big_block: in-process %d faults, uprobes %d; want at least %d and within 0.5%%", bigIn, big, bigPages)
	}
	for site := range si {
		if strings.HasPrefix(site, "raw_region ") {
			t.Errorf("in-process: site %q: no recorded call made raw_region's mapping", site)
		}
	}
	m := regexp.MustCompile(`(\d+) faults \(unattributed\) in (\d+) anonymous mappings no recorded call made`).FindStringSubmatch(ti)
	if m == nil {
		t.Fatal("in-process: analyze does not say which faults are in mappings only the kernel's records show")
	}
	if n, _ := strconv.ParseInt(m[1], 10, 64); n < raw+stack {
		t.Errorf("in-process: %s faults in mappings only the kernel showed, want at least the uprobe recording's %d in raw_region's and the thread stack's", m[1], raw+stack)
	}
}
