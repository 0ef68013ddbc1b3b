package perfdata_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
)

// TestSidebandAgainstPerfScript compares the non-sample records (MMAP,
// MMAP2, COMM, FORK, EXIT, LOST, LOST_SAMPLES) with what `perf script
// --show-task-events --show-mmap-events --show-lost-events` printed for the
// same fixture (FIXTURE.sideband.txt, written by testdata/gen.sh): the same
// records in the same order with the same times and contents.
func TestSidebandAgainstPerfScript(t *testing.T) {
	files := perftest.Glob(t, "perf/*.data")
	ran := 0
	line := regexp.MustCompile(`^.*?\s(-?\d+)/(-?\d+)\s+(\d+\.\d{6}): PERF_RECORD_(\w+)(.*)$`)
	for _, path := range files {
		side := strings.TrimSuffix(path, ".data") + ".sideband.txt"
		f, err := os.Open(side)
		if err != nil {
			continue
		}
		ran++
		var want []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			m := line.FindStringSubmatch(sc.Text())
			if m == nil {
				t.Fatalf("%s: cannot parse %q", side, sc.Text())
			}
			want = append(want, sidebandKey(m[4], m[3], m[5]))
		}
		f.Close()
		t.Run(filepath.Base(path), func(t *testing.T) {
			r, err := perfdata.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var got []string
			for r.Next() {
				rec := r.Record()
				c := rec.Common()
				tm := fmt.Sprintf("%d.%06d", c.Time/1e9, c.Time%1e9/1e3)
				switch x := rec.(type) {
				case *perfdata.Mmap:
					got = append(got, sidebandKey(c.Type.String(), tm, fmt.Sprintf("[0x%x(0x%x) %s", x.Addr, x.Len, x.Filename)))
				case *perfdata.Comm:
					exec := ""
					if x.Exec {
						exec = " exec"
					}
					got = append(got, sidebandKey("COMM", tm, fmt.Sprintf("%s: %s:%d/%d", exec, x.Comm, x.Pid, x.Tid)))
				case *perfdata.Fork:
					got = append(got, sidebandKey(c.Type.String(), tm, fmt.Sprintf("(%d:%d):(%d:%d)", x.Pid, x.Tid, x.Ppid, x.Ptid)))
				case *perfdata.Exit:
					got = append(got, sidebandKey(c.Type.String(), tm, fmt.Sprintf("(%d:%d):(%d:%d)", x.Pid, x.Tid, x.Ppid, x.Ptid)))
				case *perfdata.Lost, *perfdata.LostSamples:
					got = append(got, sidebandKey(c.Type.String(), tm, ""))
				}
			}
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("record %d: got %s, perf script %s", i, got[i], want[i])
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d sideband records, perf script %d", len(got), len(want))
			}
		})
	}
	if ran == 0 {
		t.Fatal("no testdata/perf/*.sideband.txt next to the recordings (testdata/gen.sh writes them)")
	}
}

var mmapRE = regexp.MustCompile(`\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\).*?(\S+)$`)

// sidebandKey reduces a record to what both sides print the same way.
func sidebandKey(typ, tm, rest string) string {
	switch typ {
	case "MMAP", "MMAP2":
		m := mmapRE.FindStringSubmatch(strings.TrimSpace(rest))
		if m != nil {
			// perf prints the kernel map's name with its symbol appended
			// ("[kernel.kallsyms]_text"): compare the path's first word.
			return fmt.Sprintf("%s %s %s %s %s", typ, tm, m[1], m[2], m[3])
		}
	case "LOST", "LOST_SAMPLES":
		return typ + " " + tm
	}
	return typ + " " + tm + " " + strings.TrimSpace(rest)
}
