package symbolize_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/symbolize"
)

// Stacks of programs we did not write: the recordings of Debian's python3,
// xz -T2 and gcc -c (cc1, as) that testdata/gen-real.sh makes (too big to
// commit; the test skips without them). The expected text is perf's own:
// `perf script --no-inline -F comm,pid,tid,time,event,addr,ip,sym,dso,trace`
// (the <name>.noinline.script.txt gen-real.sh writes next to each recording,
// else run here), compared frame by frame as (dso, relative address).
//
// perf 6.1 on Debian unwinds with libunwind (perf script -vv prints its
// find_proc_info/access_mem trace). In cc1's process it fails to use the CFI
// of libc and ld.so and falls back to the frame-pointer chain: it stops at
// __libc_start_call_main (rbp holds 0x12 there) or skips frames that keep no
// rbp frame (_dl_start between _dl_setup_hash and _start). Where perf's stack
// differs from ours, perf's frames must be a subsequence of ours.

var realStacksDefault = []string{"python3.plain", "xz.plain", "gcc.plain"}

func realRecordings(t *testing.T) []string {
	dir := os.Getenv("FAULTLINE_REAL_DIR")
	if dir == "" {
		dir = "/tmp/faultline-real"
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.data")); len(m) == 0 {
		t.Skipf("no real-program recordings in %s (sudo testdata/gen-real.sh %s makes them; or set FAULTLINE_REAL_DIR)", dir, dir)
	}
	if os.Getenv("FAULTLINE_REAL_ALL") != "" {
		m, _ := filepath.Glob(filepath.Join(dir, "*.data"))
		return m
	}
	var out []string
	for _, n := range realStacksDefault {
		p := filepath.Join(dir, n+".data")
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		} else {
			t.Logf("%s lacks %s.data (sudo testdata/gen-real.sh %s makes it)", dir, n, dir)
		}
	}
	if len(out) == 0 {
		t.Skipf("none of the real recordings to check is in %s (sudo testdata/gen-real.sh %s makes them; FAULTLINE_REAL_ALL=1 checks every *.data there)", dir, dir)
	}
	return out
}

// perfNoInline returns perf script's text for path, without the
// PERF_RECORD_* side-band lines --show-lost-events adds.
func perfNoInline(t *testing.T, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(strings.TrimSuffix(path, ".data") + ".noinline.script.txt")
	if err != nil {
		if _, err := exec.LookPath("perf"); err != nil {
			t.Skipf("no %s.noinline.script.txt and no perf to make it", strings.TrimSuffix(path, ".data"))
		}
		args := []string{"script", "--no-inline", "-F", "comm,pid,tid,time,event,addr,ip,sym,dso,trace"}
		cmd := exec.Command("perf", args...)
		if strings.HasSuffix(path, ".pipe.data") {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd.Args = append(cmd.Args, "-i", "-")
			cmd.Stdin = f
		} else {
			cmd.Args = append(cmd.Args, "-i", path)
		}
		if text, err = cmd.Output(); err != nil {
			t.Fatalf("perf script %s: %v", path, err)
		}
	}
	var out bytes.Buffer
	skip := false
	for _, line := range bytes.SplitAfter(text, []byte("\n")) {
		if len(line) > 0 && line[0] != '\t' && line[0] != '\n' {
			skip = bytes.Contains(line, []byte(" PERF_RECORD_"))
		}
		if !skip {
			out.Write(line)
		}
	}
	return out.Bytes()
}

// ourNoInline is `faultline script --no-inline` of path with this machine's
// files (perf's build-id cache, then the recorded paths).
func ourNoInline(t *testing.T, path string) []byte {
	t.Helper()
	return runScript(t, path, symbolize.Config{}, false)
}

// isSubsequence reports whether every frame of sub appears in full, in
// order (perf may stop early or skip frames, never add or reorder them).
func isSubsequence(sub, full []frame) bool {
	j := 0
	for _, f := range full {
		if j < len(sub) && sub[j].addr == f.addr && (sub[j].dso == "?" || sub[j].dso == f.dso) {
			j++
		}
	}
	return j == len(sub)
}

// TestRealStacksMatchPerf: on Debian's own binaries, where perf's stack
// reaches a root frame, ours is identical or holds perf's frames in order
// (perf lost some), and ours reaches a root at least as often.
func TestRealStacksMatchPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real recordings take a while")
	}
	for _, path := range realRecordings(t) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".data"), func(t *testing.T) {
			perf := parseScript(t, perfNoInline(t, path))
			ours := parseScript(t, ourNoInline(t, path))
			var samples, perfRoot, oursRoot, bothRoot, identical, subseq, prefix int
			var firstBad string
			matchSamples(t, perf, ours, func(p, o scriptSample) {
				samples++
				pf, of := userFrames(p.frames), userFrames(o.frames)
				if reachesRoot(of) {
					oursRoot++
				}
				if !reachesRoot(pf) {
					return
				}
				perfRoot++
				if reachesRoot(of) {
					bothRoot++
				}
				switch {
				case sameStack(pf, of):
					identical++
				case isSubsequence(pf, of):
					subseq++
					if len(pf) < len(of) && sameStack(pf, of[:len(pf)]) {
						prefix++
					}
				case firstBad == "":
					firstBad = p.key
					t.Errorf("%s: perf's stack is not a subsequence of ours\nperf: %v\nours: %v", p.key, pf, of)
				}
			})
			pct := func(k, n int) float64 { return 100 * float64(k) / float64(max(n, 1)) }
			t.Logf("%d samples; perf reached a root in %d (%.1f%%), ours in %d (%.1f%%), both in %d; where perf did: identical %d (%.1f%%), perf's frames a subsequence of ours %d (%.1f%%; of them perf stopped early %d)",
				samples, perfRoot, pct(perfRoot, samples), oursRoot, pct(oursRoot, samples), bothRoot,
				identical, pct(identical, perfRoot), subseq, pct(subseq, perfRoot), prefix)
			if samples != len(perf) {
				t.Errorf("matched %d of perf's %d samples", samples, len(perf))
			}
			if oursRoot < perfRoot {
				t.Errorf("we reached a root in %d samples, perf in %d", oursRoot, perfRoot)
			}
		})
	}
}
