package symbolize_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/symtest"
)

// The expected stacks come from perf itself: testdata/perf/*.script.txt is
// `perf script -F comm,pid,tid,time,event,addr,ip,sym,dso,trace` of each
// recording (testdata/gen.sh), unwound by perf's libdw unwinder.

type frame struct {
	dso, addr, sym string
	inlinedOnly    bool // perf printed only "(inlined)" lines at this address
}

type scriptSample struct {
	key    string // "pid/tid time event"
	frames []frame
}

// parseScript reads perf script text into samples with one frame per
// address: perf prints an address's inlined functions first, then the real
// one with its dso; sometimes (libdw) only the inlined line.
func parseScript(t *testing.T, data []byte) []scriptSample {
	t.Helper()
	samples, err := perftest.ParseScript(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]scriptSample, 0, len(samples))
	for _, s := range samples {
		cur := scriptSample{key: s.Key()}
		for _, pf := range s.Frames {
			f := frame{addr: strconv.FormatUint(pf.Addr, 16), sym: pf.Sym, dso: pf.DSO}
			inl := f.dso == "inlined"
			if n := len(cur.frames); n > 0 && cur.frames[n-1].addr == f.addr && cur.frames[n-1].inlinedOnly {
				if !inl {
					cur.frames[n-1] = f
				}
				continue
			}
			if inl {
				f.dso, f.inlinedOnly = "?", true
			}
			cur.frames = append(cur.frames, f)
		}
		out = append(out, cur)
	}
	return out
}

var roots = map[string]bool{"_start": true, "__libc_start_call_main": true, "start_thread": true, "clone3": true}

func userFrames(fs []frame) []frame {
	var out []frame
	for _, f := range fs {
		if !strings.Contains(f.dso, "kernel") {
			out = append(out, f)
		}
	}
	return out
}

func reachesRoot(fs []frame) bool { return len(fs) > 0 && roots[fs[len(fs)-1].sym] }

// sameStack compares stacks as (dso, address) per frame; where perf printed
// only an inlined line it gave no dso, so the address alone is compared.
func sameStack(perf, ours []frame) bool {
	if len(perf) != len(ours) {
		return false
	}
	for i := range perf {
		if perf[i].addr != ours[i].addr || (perf[i].dso != "?" && perf[i].dso != ours[i].dso) {
			return false
		}
	}
	return true
}

type compareResult struct {
	samples, perfRoot, identical, oursRoot int
	firstDiff                              string
}

func compareStacks(t *testing.T, perf, ours []scriptSample) compareResult {
	var r compareResult
	matchSamples(t, perf, ours, func(p, o scriptSample) {
		r.samples++
		pf, of := userFrames(p.frames), userFrames(o.frames)
		if reachesRoot(of) {
			r.oursRoot++
		}
		if !reachesRoot(pf) {
			return
		}
		r.perfRoot++
		if sameStack(pf, of) {
			r.identical++
		} else if r.firstDiff == "" {
			r.firstDiff = fmt.Sprintf("%s\nperf: %v\nours: %v", p.key, pf, of)
		}
	})
	return r
}

// matchSamples calls fn with each of perf's samples and the next of ours
// with the same key; a sample of perf's that ours lacks is a test error.
func matchSamples(t *testing.T, perf, ours []scriptSample, fn func(p, o scriptSample)) {
	t.Helper()
	byKey := map[string][]scriptSample{}
	for _, s := range ours {
		byKey[s.key] = append(byKey[s.key], s)
	}
	for _, p := range perf {
		c := byKey[p.key]
		if len(c) == 0 {
			t.Errorf("sample %s in perf's output, not in ours", p.key)
			continue
		}
		byKey[p.key] = c[1:]
		fn(p, c[0])
	}
}

// fixtureConfig finds the fixtures' binaries in testdata alone.
var fixtureConfig = symbolize.Config{Symfs: "../testdata/symfs", BuildIDDir: "../testdata/buildid-cache", Getenv: func(string) string { return "" }}

// runScript is `faultline script` of path, in-process, with cfg's files.
func runScript(t *testing.T, path string, cfg symbolize.Config, inline bool) []byte {
	t.Helper()
	r, sess := symtest.Open(t, path, cfg)
	w := &symbolize.ScriptWriter{S: sess, Inline: inline}
	for _, ev := range r.Events() {
		w.NameWidth = max(w.NameWidth, len(ev.Name))
	}
	var out bytes.Buffer
	for r.Next() {
		switch rec := r.Record().(type) {
		case *perfdata.Sample:
			id, _ := sess.Unwind(rec, true)
			out.Write(w.Format(rec, id))
		default:
			sess.Observe(rec)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestStacksMatchPerf: on every fixture, where perf's stack reaches a root
// frame ours is the same in ≥ 99% of samples, and ours reaches a root at
// least as often as perf's.
func TestStacksMatchPerf(t *testing.T) {
	files := perftest.Glob(t, "perf/*.data")
	for _, f := range files {
		base := strings.TrimSuffix(f, ".data")
		t.Run(filepath.Base(base), func(t *testing.T) {
			want, err := os.ReadFile(base + ".script.txt")
			if err != nil {
				t.Fatal(err)
			}
			perf := parseScript(t, want)
			ours := parseScript(t, runScript(t, f, fixtureConfig, true))
			r := compareStacks(t, perf, ours)
			t.Logf("%d samples; perf reached a root in %d, ours in %d; identical where perf reached it: %d", r.samples, r.perfRoot, r.oursRoot, r.identical)
			if r.samples != len(perf) {
				t.Errorf("matched %d of perf's %d samples", r.samples, len(perf))
			}
			if r.identical*100 < r.perfRoot*99 {
				t.Errorf("identical stacks %d of %d (< 99%%); first difference:\n%s", r.identical, r.perfRoot, r.firstDiff)
			}
			if r.oursRoot < r.perfRoot {
				t.Errorf("we reached a root in %d samples, perf in %d", r.oursRoot, r.perfRoot)
			}
		})
	}
}
