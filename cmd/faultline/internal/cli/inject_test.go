package cli

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
)

// injectAnalyze runs `faultline analyze` in-process on data (a file, or
// standard input when stdin is set) and returns the exit status and output.
func injectAnalyze(t *testing.T, data []byte, stdin bool) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.data")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"analyze", "--symfs", "../../../../testdata/symfs", "-o", filepath.Join(dir, "out.pb.gz"), in}
	env := &Env{Stdin: bytes.NewReader(nil)}
	if stdin {
		args[len(args)-1] = "-"
		env.Stdin = bytes.NewReader(data)
	}
	var out, errb bytes.Buffer
	env.Stdout, env.Stderr = &out, &errb
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("analyze panicked: %v", p)
		}
	}()
	code = Main(args, env)
	return code, out.String(), errb.String()
}

// TestAnalyzeHostileInputs: inputs that are not recordings at all get a
// one-line error naming what they are and exit status 2.
func TestAnalyzeHostileInputs(t *testing.T) {
	elfBin := perftest.ReadTestdata(t, "symfs/tmp/faultline-fixtures/bin/basic")
	random := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"random", random, "not a perf.data file"},
		{"elf", elfBin, "ELF"},
		{"magic-only", []byte(perfdata.MagicLE), "0x"},
		{"pipe-header-only", []byte(perfdata.MagicLE + "\x10\x00\x00\x00\x00\x00\x00\x00"), "no events"},
	} {
		for _, stdin := range []bool{false, true} {
			name := c.name
			if stdin {
				name += "/stdin"
			}
			t.Run(name, func(t *testing.T) {
				code, stdout, stderr := injectAnalyze(t, c.data, stdin)
				if code != ExitFailure {
					t.Errorf("exit status %d, want %d; stderr:\n%s", code, ExitFailure, stderr)
				}
				if stdout != "" {
					t.Errorf("stdout not empty:\n%s", stdout)
				}
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				if len(lines) != 1 || !strings.HasPrefix(lines[0], "faultline: ") {
					t.Errorf("want one line 'faultline: ...' on stderr, got:\n%s", stderr)
				}
				if !stdin && !strings.Contains(stderr, c.want) {
					t.Errorf("stderr does not say %q:\n%s", c.want, stderr)
				}
			})
		}
	}
}

// TestAnalyzeTruncated: a pipe-mode recording cut mid-record yields the
// profile of everything before the cut (exit 0), says so in the summary and
// warns with the offset; a file cut inside its data loses the probes'
// formats (kept after the data), and the one error says the file was
// truncated.
func TestAnalyzeTruncated(t *testing.T) {
	pipe := perftest.ReadTestdata(t, "perf", "threads.pipe.data")
	for _, stdin := range []bool{false, true} {
		code, stdout, stderr := injectAnalyze(t, pipe[:len(pipe)*2/3+5], stdin)
		if code != ExitOK {
			t.Fatalf("pipe recording cut at 2/3 (stdin %v): exit %d; stderr:\n%s", stdin, code, stderr)
		}
		if !strings.Contains(stdout, "Truncated:") {
			t.Errorf("summary does not say truncated:\n%s", stdout)
		}
		if !strings.Contains(stderr, "warning: ") || !strings.Contains(stderr, "0x") {
			t.Errorf("no warning naming the offset:\n%s", stderr)
		}
	}
	file := perftest.ReadTestdata(t, "perf", "threads.plain.data")
	// A file cut inside its data loses the feature section (event names,
	// probe formats): either the events are inferred and the profile of
	// everything before the cut is written (exit 0, summary says
	// truncated), or one error says the file was truncated (exit 2).
	code, stdout, stderr := injectAnalyze(t, file[:len(file)/2], false)
	switch {
	case code == ExitOK:
		if !strings.Contains(stdout, "Truncated:") || !strings.Contains(stderr, "0x") {
			t.Errorf("file recording cut in half: exit 0 without saying truncated at 0x...:\n%s\n%s", stdout, stderr)
		}
	case code != ExitFailure || !strings.Contains(stderr, "truncated") || !strings.Contains(stderr, "0x"):
		t.Errorf("file recording cut in half: exit %d, want 0 or %d with an error saying truncated at 0x...; stderr:\n%s", code, ExitFailure, stderr)
	}
	if first := strings.SplitN(stderr, "\n", 2)[0]; !strings.HasPrefix(first, "faultline: ") {
		t.Errorf("stderr does not start with faultline: ...:\n%s", stderr)
	}
}

// TestAnalyzeMaxLive: the live-set guard is a flag; at the cap the summary
// says how many allocations were not tracked.
func TestAnalyzeMaxLive(t *testing.T) {
	data := perftest.Testdata(t, "perf", "basic.z.data")
	out := filepath.Join(t.TempDir(), "out.pb.gz")
	var stdout, stderr bytes.Buffer
	code := Main([]string{"analyze", "--symfs", "../../../../testdata/symfs", "--max-live", "5", "-o", out, data}, &Env{Stdout: &stdout, Stderr: &stderr})
	if code != ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "allocations not tracked (--max-live reached)") {
		t.Errorf("summary does not report the cap:\n%s", stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := Main([]string{"analyze", "--max-live", "-1", "-o", out, data}, &Env{Stdout: &stdout, Stderr: &stderr}); code != ExitFailure {
		t.Errorf("--max-live -1: exit %d, want %d", code, ExitFailure)
	}
}

// TestAnalyzeCorruptRecord: a record whose length cannot be known stops
// decoding; the records before it still make a profile (exit 0), and the
// warning names the offset.
func TestAnalyzeCorruptRecord(t *testing.T) {
	for _, name := range []string{"threads.plain.data", "threads.pipe.data"} {
		p := perftest.ReadTestdata(t, "perf", name)
		q, off := perftest.ZeroRecordSize(t, p, 2.0/3)
		code, stdout, stderr := injectAnalyze(t, q, false)
		if code != ExitOK {
			t.Fatalf("%s with a size-0 record at %#x: exit %d; stderr:\n%s", name, off, code, stderr)
		}
		if !strings.Contains(stdout, "decoding stopped at a corrupt record") {
			t.Errorf("%s: summary does not say decoding stopped:\n%s", name, stdout)
		}
		if want := fmt.Sprintf("0x%x", off); !strings.Contains(stderr, "warning: decoding stopped") || !strings.Contains(stderr, want) {
			t.Errorf("%s: no warning naming offset %s:\n%s", name, want, stderr)
		}
	}
}
