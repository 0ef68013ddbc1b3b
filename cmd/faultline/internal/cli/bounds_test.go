package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize/binfile"
)

// TestMain lets tests run faultline in a child process (see runBounded):
// with FAULTLINE_CLI_CHILD set, the test binary is faultline. What the live
// tests built once for the process is removed after the tests.
func TestMain(m *testing.M) {
	if os.Getenv("FAULTLINE_CLI_CHILD") != "" {
		os.Exit(Main(os.Args[1:], StdEnv()))
	}
	code := m.Run()
	removeBuilds()
	os.Exit(code)
}

// boundedRun is one faultline run in a child process.
type boundedRun struct {
	code           int
	stdout, stderr string
	rss            int64 // peak RSS, bytes
	took           time.Duration
	cpu            time.Duration // user + system
}

// runBounded runs faultline with args in a child process and fails the
// test unless it stayed under 1 GiB of RSS and 60 s: bad input must
// cost bounded memory and time.
func runBounded(t *testing.T, args ...string) boundedRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FAULTLINE_CLI_CHILD=1")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Start()
	if err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	err = cmd.Wait()
	timer.Stop()
	r := boundedRun{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	r.code = cmd.ProcessState.ExitCode()
	r.rss = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	t.Logf("faultline %s: exit %d, max RSS %d MiB, %v", strings.Join(args, " "), r.code, r.rss>>20, r.took.Round(time.Millisecond))
	if r.rss >= 1<<30 || r.took >= 60*time.Second {
		t.Errorf("faultline %s: max RSS %d MiB, %v: want under 1 GiB and 60 s", strings.Join(args, " "), r.rss>>20, r.took)
	}
	return r
}

// diff on hostile inputs: each stops with a clear message and exit 2, or
// (values near ±2^63, huge labels) answers correctly in little output.
func TestDiffBounds(t *testing.T) {
	sat := perftest.Testdata(t, "crafted", "diff-sat-new.pb.gz")
	for _, c := range []struct {
		base, head string
		code       int
		msg        string
	}{
		{perftest.Testdata(t, "crafted", "diff-nested.pb.gz"), sat, ExitFailure, "gzip layer 2: decompresses to more than 128 MiB"},
		{"/dev/zero", sat, ExitFailure, "/dev/zero: not a faultline profile (gzipped pprof) or perf.data recording: more than 64 MiB"},
		{perftest.Testdata(t, "crafted", "diff-sat-base.pb.gz"), sat, ExitRegression, "REGRESSION: 1 site grew"},
		{perftest.Testdata(t, "crafted", "diff-wide.pb.gz"), perftest.Testdata(t, "crafted", "diff-wide.pb.gz"), ExitOK, ""},
	} {
		r := runBounded(t, "diff", c.base, c.head)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) || strings.Count(r.stderr, "\n") > 1 {
			t.Errorf("diff %s %s: exit %d, stderr %q; want exit %d and %q", c.base, c.head, r.code, r.stderr, c.code, c.msg)
		}
		if len(r.stdout) > 16<<10 {
			t.Errorf("diff %s %s: %d bytes of output", c.base, c.head, len(r.stdout))
		}
	}
}

// fifos serves each file through a named pipe that can be read once, as
// diff <(cat FILE) ... does.
func fifos(t *testing.T, files ...string) []string {
	dir := t.TempDir()
	var names []string
	for i, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		fifo := filepath.Join(dir, fmt.Sprint(i))
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		go func() {
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Write(data)
				f.Close()
			}
		}()
		names = append(names, fifo)
	}
	return names
}

// diff <(cat base.pb.gz) <(cat new.pb.gz), and the same with pipe-mode
// recordings: the format is sniffed without reopening the pipe.
func TestDiffPipes(t *testing.T) {
	names := fifos(t, perftest.Testdata(t, "crafted", "diff-sat-base.pb.gz"), perftest.Testdata(t, "crafted", "diff-sat-new.pb.gz"))
	code, stdout, stderr := runCLI("diff", names[0], names[1])
	if code != ExitRegression || !strings.Contains(stdout, "+9223372036854775807") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	rec := "../../../../testdata/perf/basic.pipe.data"
	names = fifos(t, rec, rec)
	code, stdout, stderr = runCLI("diff", "--symfs", "../../../../testdata/symfs", names[0], names[1])
	if code != ExitOK || !strings.Contains(stdout, "OK: no site grew") {
		t.Errorf("pipe-mode recordings through pipes: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// A recording naming /../../../../../../../etc/shadow
// (testdata/crafted/escape.data): with --symfs the file looked at is
// DIR/etc/shadow, and no message shows what it holds.
func TestSymfsEscape(t *testing.T) {
	symfs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(symfs, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(symfs, "etc", "shadow"), []byte("root:$y$secret:19000::::::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("script", "--symfs", symfs, perftest.Testdata(t, "crafted", "escape.data"))
	if code != ExitOK || !strings.Contains(stdout, "[unknown] (/../../../../../../../etc/shadow)") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, symfs+"/etc/shadow: not an ELF file") || strings.Contains(stderr, "searched /etc") || strings.Contains(stderr, ", /etc/shadow") {
		t.Errorf("stderr does not show the search confined to the symfs:\n%s", stderr)
	}
	if strings.Contains(stderr, "root") || strings.Contains(stderr, "114 111 111 116") || strings.Contains(stderr, "secret") {
		t.Errorf("stderr echoes the file's contents:\n%s", stderr)
	}
}

// TestAnalyzeCPUPerInputByte: analyze spends at most 2 s of CPU per MB of
// input on each crafted file and on each file of the recording decoder's
// fuzz corpus (FuzzReader's seeds: the first 8 KB of every recording in
// testdata/perf, and the first 16 KB too), beyond what analyzing the
// smallest one (escape.data, 360 bytes: the process's own start and end)
// costs and what loading the least budget of debug info and symbols may
// cost (the C library's lines for a recording of any size: a 16 KB
// prefix of a -z recording takes 0.1 s loading libc's debug info).
// roundbomb.data, 90 KB expanding to a GiB of FINISHED_ROUND records,
// took 32 s when the reader went through all of them; manybins.data (105
// KB naming 512 of the host's shared libraries; with --allow-mismatch, so
// that the files found are used whatever their identity) 0.3 s reading
// their symbol tables: past that least budget, the debug info and symbol
// tables loaded are bounded by the input's size (binfile.DWARFForInput,
// SymbolsForInput). CPU time on a shared machine varies: a file over the
// bound is run twice more and its least CPU counts.
func TestAnalyzeCPUPerInputByte(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.pb.gz")
	cpu := func(extra []string, path string) (time.Duration, int) {
		r := runBounded(t, append(append([]string{"analyze", "-q", "-o", prof}, extra...), path)...)
		return r.cpu, r.code
	}
	base, _ := cpu(nil, perftest.Testdata(t, "crafted", "escape.data"))
	// What the least budget lets any recording load, however small:
	// MinInputDWARF of the system libraries' debug files (about 12 ns a
	// byte to inflate and index) and MinInputSymbols of symbol tables
	// (about 25 ns a byte), so that a small recording is named as fully
	// as a large one (libc's lines: 8.5 MB of DWARF).
	floor := time.Duration(binfile.MinInputDWARF*12 + binfile.MinInputSymbols*25)
	type input struct {
		path  string
		extra []string
	}
	var inputs []input
	for _, name := range []string{"zbomb.data", "roundbomb.data", "sametime.data", "endless.data"} {
		inputs = append(inputs, input{perftest.Testdata(t, "crafted", name), nil})
	}
	inputs = append(inputs, input{perftest.Testdata(t, "crafted", "manybins.data"), []string{"--allow-mismatch"}})
	for _, path := range perftest.Glob(t, "perf/*.data") {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{8 << 10, 16 << 10} {
			prefix := filepath.Join(dir, fmt.Sprintf("%dk-%s", n>>10, filepath.Base(path)))
			if err := os.WriteFile(prefix, data[:min(n, len(data))], 0o644); err != nil {
				t.Fatal(err)
			}
			inputs = append(inputs, input{prefix, nil})
		}
	}
	for _, in := range inputs {
		fi, err := os.Stat(in.path)
		if err != nil {
			t.Fatal(err)
		}
		allowed := base + floor + time.Duration(float64(fi.Size())/1e6*2*float64(time.Second))
		took, code := cpu(in.extra, in.path)
		for i := 0; i < 2 && took > allowed; i++ {
			again, _ := cpu(in.extra, in.path)
			took = min(took, again)
		}
		t.Logf("%s: %d bytes, exit %d, %v of CPU (allowed %v)", filepath.Base(in.path), fi.Size(), code, took, allowed)
		if took > allowed {
			t.Errorf("%s: %v of CPU for %d bytes, more than 2 s/MB past the %v a minimal run takes and the %v the least budget allows", filepath.Base(in.path), took, fi.Size(), base, floor)
		}
	}
}

// zbomb.data (121 KB expanding over 10000×) stops with a clear message and
// exit 2, in bounded memory, whichever command reads it.
func TestZbombCommands(t *testing.T) {
	zbomb := perftest.Testdata(t, "crafted", "zbomb.data")
	for _, args := range [][]string{{"info", zbomb}, {"script", zbomb}} {
		r := runBounded(t, args...)
		if r.code != ExitFailure || !strings.Contains(r.stderr, "compressed records expand") || !strings.Contains(r.stderr, "corrupt or crafted") {
			t.Errorf("%s: exit %d, stderr %q", args[0], r.code, r.stderr)
		}
	}
}
