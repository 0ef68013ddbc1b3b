package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// TestInfoLiveAgainstPerf records Debian's own (stripped) binaries with perf
// in every variant faultline reads (file, pipe, -z, and the
// exceptions:page_fault_user tracepoint) and checks that faultline info
// counts the same samples per event as perf script does on the same file.
// It needs root, perf and tracefs (it adds malloc probes of its own, in a
// group named after the test process, and removes them); it skips
// otherwise. Stacks are cut to 1 KiB to keep it under a minute.
func TestInfoLiveAgainstPerf(t *testing.T) {
	requireLiveRecord(t)
	perf := requirePerf(t)
	if _, err := os.Stat("/sys/kernel/tracing/events/exceptions/page_fault_user"); err != nil {
		t.Skipf("no exceptions:page_fault_user tracepoint: %v", err)
	}
	group := fmt.Sprintf("flinfo_%d", os.Getpid())
	sys := realSystem{}
	r := &recorder{sys: sys, env: &Env{Stderr: os.Stderr}, opts: &recordOptions{quiet: true}, group: group}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to find the system's libc from")
	}
	lib, err := r.findLibc(sh)
	if err != nil {
		t.Fatalf("the system's libc (from %s): %v", sh, err)
	}
	defs, _, err := rec.UprobeDefinitions(sys, lib, group, []string{"malloc"})
	if err != nil {
		t.Fatal(err)
	}
	addLiveProbes(t, defs)
	dir := t.TempDir()
	src := filepath.Join(dir, "small.c")
	os.WriteFile(src, []byte("int f(int x) { return x * 2; }\nint main(void) { return f(3); }\n"), 0o644)
	workloads := map[string][]string{
		"xz": {"xz", "-T2", "-k", "-c", "/etc/services"},
		// Python's startup alone makes ~45000 mallocs (~100 MB of stacks).
		"python": {"python3", "-S", "-I", "-c", "pass"},
	}
	if _, err := exec.LookPath("gcc"); err == nil {
		// The driver forks and execs cc1 and as: perf follows children.
		workloads["gcc"] = []string{"gcc", "-c", "-o", filepath.Join(dir, "small.o"), src}
	}
	common := []string{"-c", "1", "-d", "--call-graph", "dwarf,1024", "-e", group + ":malloc", "-e", group + ":malloc__return"}
	start := time.Now()
	for name, cmd := range workloads {
		if _, err := exec.LookPath(cmd[0]); err != nil {
			continue
		}
		for _, v := range []string{"plain", "pipe", "z", "tp"} {
			t.Run(name+"."+v, func(t *testing.T) {
				out := filepath.Join(dir, name+"."+v+".data")
				args := append([]string{"record"}, common...)
				if v == "tp" {
					args = append(args, "-e", "exceptions:page_fault_user")
				} else {
					args = append(args, "-e", "page-faults:u")
				}
				if v == "z" {
					args = append(args, "-z")
				}
				if v == "pipe" {
					args = append(args, "-o", "-")
				} else {
					args = append(args, "-o", out)
				}
				args = append(append(args, "--"), cmd...)
				rec := exec.Command(perf, args...)
				var stderr bytes.Buffer
				rec.Stderr = &stderr
				if v == "pipe" {
					f, err := os.Create(out)
					if err != nil {
						t.Fatal(err)
					}
					rec.Stdout = f
					defer f.Close()
				}
				if err := rec.Run(); err != nil {
					t.Skipf("perf record failed (%v): %s", err, stderr.String())
				}
				// Reference: perf script's own count of samples per event.
				// -G: in pipe mode perf script prints (and symbolizes, slowly)
				// callchains even with -F event.
				script := exec.Command(perf, "script", "-G", "-F", "event")
				if v == "pipe" {
					script.Args = append(script.Args, "-i", "-")
					f, err := os.Open(out)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					script.Stdin = f
				} else {
					script.Args = append(script.Args, "-i", out)
				}
				text, err := script.Output()
				if err != nil {
					t.Fatalf("perf script: %v", err)
				}
				want := map[string]uint64{}
				for _, line := range strings.Split(string(text), "\n") {
					if strings.HasPrefix(line, "\t") {
						continue // perf script prints pipe-mode callchains even with -F event
					}
					if ev := strings.TrimSuffix(strings.TrimSpace(line), ":"); ev != "" {
						want[ev]++
					}
				}
				stdout, errText, code := runMain(t, nil, "info", "--json", out)
				if code != 0 {
					t.Fatalf("faultline info: exit %d: %s", code, errText)
				}
				rep := checkInfoJSON(t, stdout, want)
				var parts []string
				for _, e := range rep.Events {
					parts = append(parts, e.Name+"="+strconv.FormatUint(e.Samples, 10)+"/lost "+strconv.FormatUint(e.Lost, 10))
				}
				t.Logf("%s: %s (perf script agrees)", filepath.Base(out), strings.Join(parts, " "))
			})
		}
	}
	t.Logf("took %v", time.Since(start).Round(time.Second))
}
