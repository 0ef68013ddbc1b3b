package cli

import (
	"bufio"
	"bytes"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/symbolize"
)

// deepStack is one sampled allocation of testdata/record/src/deep.c as
// faultline script prints it: its thread, its size and its frames'
// functions, innermost first.
type deepStack struct {
	main  bool // the main thread (tid = pid)
	size  uint64
	funcs []string
}

var deepHeader = regexp.MustCompile(`^\s*deep\s+(\d+)/(\d+)\s.* [^ ]+:malloc/stack-[^:]*: .* size=(\d+) `)

// deepStacks reads the stack samples of deep's mallocs from faultline
// script's output.
func deepStacks(t *testing.T, out []byte) []deepStack {
	t.Helper()
	var all []deepStack
	var cur *deepStack
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := deepHeader.FindStringSubmatch(line); m != nil {
			size, _ := strconv.ParseUint(m[3], 10, 64)
			all = append(all, deepStack{main: m[1] == m[2], size: size})
			cur = &all[len(all)-1]
			continue
		}
		if cur == nil || !strings.HasPrefix(line, "\t") {
			cur = nil
			continue
		}
		// "\t  ADDR FUNC (DSO)"
		f := strings.Fields(line)
		if len(f) >= 2 {
			cur.funcs = append(cur.funcs, f[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return all
}

// complete reports whether s is what deep's structure says its stack is:
// malloc, then as many frames of descend as the size says (64 + 8·d bytes
// at depth d; the bottom's big block adds 65536), then worker, then main
// and the C library's start-up up to _start in the main thread, or
// start_thread and clone3 in the other.
func (s deepStack) complete() bool {
	d := int((s.size%65536 - 64) / 8)
	f := s.funcs
	if len(f) < 1+d+2 || f[0] != "malloc" {
		return false
	}
	for _, fn := range f[1 : 1+d] {
		if fn != "descend" {
			return false
		}
	}
	rest := f[1+d:]
	if rest[0] != "worker" {
		return false
	}
	if s.main {
		return len(rest) >= 3 && rest[1] == "main" && rest[len(rest)-1] == "_start"
	}
	return len(rest) == 3 && rest[1] == "start_thread" && rest[2] == "clone3"
}

// TestRecordLiveDeepStacks records testdata/record/src/deep.c (allocations
// at every level of a 200-frame recursion, 112 bytes a frame, in the main
// thread and another) with the defaults and checks that at least 99% of
// the sampled stacks are whole: each, as faultline script unwinds it, has
// exactly the frames of descend its allocation's size says and ends at
// the thread's root frame, and analyze counts at least 99% of the stacks
// as having reached the root.
func TestRecordLiveDeepStacks(t *testing.T) {
	progs := requireInproc(t)
	for _, method := range []string{"inproc", "uprobe"} {
		t.Run(method, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "deep.data")
			if code, stderr := runRecordMain("-q", "--method", method, "-o", out, "--", filepath.Join(progs, "deep"), "200", "100"); code != ExitOK {
				t.Fatalf("record exited %d: %s", code, stderr)
			}
			var script bytes.Buffer
			if code := Main([]string{"script", out}, &Env{Stdout: &script, Stderr: io.Discard}); code != 0 {
				t.Fatalf("script exited %d", code)
			}
			stacks := deepStacks(t, script.Bytes())
			var whole, mainThread int
			for _, s := range stacks {
				if s.complete() {
					whole++
				}
				if s.main {
					mainThread++
				}
			}
			// Each thread: 100 × 201 mallocs, 100 of them big (all with
			// stacks) and 1 in 61 of the rest: about 430.
			if mainThread < 300 || len(stacks)-mainThread < 300 {
				t.Fatalf("%d stacks of the main thread and %d of the other; want about 430 each", mainThread, len(stacks)-mainThread)
			}
			if whole*100 < 99*len(stacks) {
				t.Errorf("%d of %d sampled stacks whole; want at least 99%%", whole, len(stacks))
			}
			res, err := analyzeFile(&Env{Stderr: io.Discard}, out, defaultAnalyzeOptions(), symbolize.Config{}, true)
			if err != nil {
				t.Fatal(err)
			}
			u := res.Summary.Unwind
			t.Logf("%d of %d sampled stacks whole (%d of the main thread); analyze: %d of %d reached the root", whole, len(stacks), mainThread, u.Complete, u.Samples)
			if u.Samples < uint64(len(stacks)) || u.Complete*100 < 99*u.Samples {
				t.Errorf("analyze: %d of %d stacks reached the root (stopped early: %v); want at least 99%%", u.Complete, u.Samples, u.ByStop)
			}
		})
	}
}
