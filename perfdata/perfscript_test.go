package perfdata_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
)

// The expected values in this file come from perf itself: testdata/gen.sh
// records each fixture with perf 6.1 and writes `perf script -F
// comm,pid,tid,time,event,addr,ip,sym,dso,trace` next to it
// (FIXTURE.script.txt). We decode the same file and compare every sample,
// in order: pid, tid, time (perf prints %d.%06d of the ns timestamp), event
// name, the fault address and the tracepoint fields perf printed.

var traceKV = regexp.MustCompile(`(\w+)=(0x[0-9a-fA-F]+|-?\d+)`)
var probeIPs = regexp.MustCompile(`^\(([0-9a-f]+)(?: <- ([0-9a-f]+))?\)`)

func fixtures(t testing.TB) []string {
	m := perftest.Glob(t, "perf/*.data")
	if dir := os.Getenv("PERFDATA_TEST_DIR"); dir != "" {
		// Extra recordings made by hand, with FILE.script.txt next to each.
		m2, _ := filepath.Glob(filepath.Join(dir, "*.data"))
		m = append(m, m2...)
	}
	return m
}

func TestAgainstPerfScript(t *testing.T) {
	files := fixtures(t)
	for _, path := range files {
		script := strings.TrimSuffix(path, ".data") + ".script.txt"
		if _, err := os.Stat(script); err != nil {
			// Every committed recording has its perf script text;
			// a hand-made one in PERFDATA_TEST_DIR may not.
			if strings.Contains(path, filepath.Join("testdata", "perf")) {
				t.Errorf("committed fixture missing: %v (testdata/gen.sh writes it)", err)
			} else {
				t.Logf("%s: no %s to compare with; skipped", path, filepath.Base(script))
			}
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			want := perftest.ReadScript(t, script)
			r, err := perfdata.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			fields := map[*perfdata.Event]map[string]*perfdata.TraceField{}
			i := 0
			counts := map[string]int{}
			for r.Next() {
				s, ok := r.Record().(*perfdata.Sample)
				if !ok {
					continue
				}
				counts[s.Event.Name]++
				if i >= len(want) {
					i++
					continue
				}
				w := want[i]
				i++
				where := fmt.Sprintf("sample %d at 0x%x (perf script line %d)", i, s.Offset, w.Line)
				got := fmt.Sprintf("%d.%06d", s.Time/1e9, s.Time%1e9/1e3)
				if s.Pid != w.Pid || s.Tid != w.Tid || got != w.Time || s.Event.Name != w.Event {
					t.Fatalf("%s: got %d/%d %s %s, perf script has %d/%d %s %s", where, s.Pid, s.Tid, got, s.Event.Name, w.Pid, w.Tid, w.Time, w.Event)
				}
				if s.Event.Format == nil {
					// page-faults:u: the first field is the data address.
					tok := strings.Fields(w.Rest)
					if len(tok) == 0 {
						t.Fatalf("%s: no address in %q", where, w.Rest)
					}
					addr, err := strconv.ParseUint(tok[0], 16, 64)
					if err != nil || addr != s.Addr {
						t.Fatalf("%s: addr 0x%x, perf script has %q", where, s.Addr, tok[0])
					}
					continue
				}
				fm := fields[s.Event]
				if fm == nil {
					fm = map[string]*perfdata.TraceField{}
					for k := range s.Event.Format.Fields {
						f := &s.Event.Format.Fields[k]
						fm[f.Name] = f
					}
					fields[s.Event] = fm
				}
				check := func(name, text string) {
					f := fm[name]
					if f == nil {
						t.Fatalf("%s: event %s has no field %q (fields %v)", where, s.Event.Name, name, s.Event.Format.Fields)
					}
					v, ok := f.Uint64(s.Raw)
					if !ok {
						t.Fatalf("%s: field %s does not fit raw data of %d bytes", where, name, len(s.Raw))
					}
					var want uint64
					var err error
					if strings.HasPrefix(text, "0x") {
						want, err = strconv.ParseUint(text[2:], 16, 64)
					} else if strings.HasPrefix(text, "-") {
						var x int64
						x, err = strconv.ParseInt(text, 10, 64)
						want = uint64(x)
					} else {
						want, err = strconv.ParseUint(text, 10, 64)
					}
					if err != nil {
						t.Fatalf("%s: bad number %q", where, text)
					}
					if v != want {
						t.Fatalf("%s: field %s = 0x%x, perf script has %s", where, name, v, text)
					}
				}
				rest := w.Rest
				if m := probeIPs.FindStringSubmatch(rest); m != nil {
					if m[2] == "" {
						check("__probe_ip", "0x"+m[1])
					} else {
						check("__probe_func", "0x"+m[1])
						check("__probe_ret_ip", "0x"+m[2])
					}
					rest = rest[len(m[0]):]
				}
				kvs := traceKV.FindAllStringSubmatch(rest, -1)
				if len(kvs) == 0 {
					t.Fatalf("%s: no fields in %q", where, w.Rest)
				}
				for _, kv := range kvs {
					check(kv[1], kv[2])
				}
			}
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			if i != len(want) {
				t.Errorf("decoded %d samples, perf script printed %d", i, len(want))
			}
			wantCounts := map[string]int{}
			for _, w := range want {
				wantCounts[w.Event]++
			}
			for _, ev := range r.Events() {
				if int(ev.Samples) != wantCounts[ev.Name] {
					t.Errorf("event %s: %d samples, perf script %d", ev.Name, ev.Samples, wantCounts[ev.Name])
				}
			}
			t.Logf("%d samples match perf script: %v", i, counts)
		})
	}
}
