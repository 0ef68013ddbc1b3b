package analyze

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize"
)

// TestSelectPrograms: --comm and --pid keep the samples of some programs of
// a multi-program recording. testdata/perf/forkexec.plain.data holds three:
// the static launcher (comm launch), which execs forkexec in the same
// process, and forkexec's child, which execs exectarget. The reference is
// perf script's text of the same file (forkexec.plain.script.txt): its
// page-faults:u and probe_libc:malloc lines per comm and per pid.
func TestSelectPrograms(t *testing.T) {
	path := perftest.Testdata(t, "perf", "forkexec.plain.data")
	script := perftest.ReadScript(t, perftest.Testdata(t, "perf", "forkexec.plain.script.txt"))
	var parent, child uint32
	for _, s := range script {
		if s.Comm == "exectarget" {
			child = s.Pid
		}
		if s.Comm == "launch" {
			parent = s.Pid
		}
	}
	if parent == 0 || child == 0 || parent == child {
		t.Fatalf("perf script shows no launcher and child: %d %d", parent, child)
	}
	count := func(event string, comms []string, pids []uint32) (n uint64) {
		for _, s := range script {
			if s.Event == event && (len(comms) == 0 || slices.Contains(comms, s.Comm)) && (len(pids) == 0 || slices.Contains(pids, s.Pid)) {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		comms []string
		pids  []uint32
		kept  string // the processes, named as they ended
	}{
		{[]string{"exectarget"}, nil, "process %c exectarget"},
		{[]string{"launch"}, nil, "process %p forkexec"},
		{[]string{"forkexec"}, nil, "processes %p forkexec, %c exectarget"},
		{[]string{"launch", "exectarget"}, nil, "processes %p forkexec, %c exectarget"},
		{nil, []uint32{child}, "process %c exectarget"},
		{[]string{"forkexec"}, []uint32{child}, "process %c exectarget"},
	} {
		opts := Options{Attr: attribute.DefaultConfig(), Comms: tc.comms, Pids: tc.pids}
		res := analyzePath(t, path, fixtureFiles, opts)
		sel := res.Summary.Selection
		faults, calls := count("page-faults:u", tc.comms, tc.pids), count("probe_libc:malloc", tc.comms, tc.pids)
		if sel == nil || res.Summary.Tracker.Faults != faults || sel.Faults != faults || sel.Calls != calls || res.Summary.Tracker.Entries != calls ||
			sel.FaultsAll != count("page-faults:u", nil, nil) || sel.CallsAll != count("probe_libc:malloc", nil, nil) {
			t.Errorf("%v %v: tracker %d faults %d entries, selection %+v; perf script: %d faults, %d mallocs", tc.comms, tc.pids,
				res.Summary.Tracker.Faults, res.Summary.Tracker.Entries, sel, faults, calls)
			continue
		}
		var b strings.Builder
		res.Summary.WriteText(&b)
		kept := strings.NewReplacer("%p", itoa(parent), "%c", itoa(child)).Replace(tc.kept)
		if first, _, _ := strings.Cut(b.String(), "\n"); !strings.HasPrefix(first, "Selected:     "+sel.String()+": "+kept+"; ") {
			t.Errorf("%v %v: summary's first line %q, want the selection and %q", tc.comms, tc.pids, first, kept)
		}
	}
	// Nothing matched: the summary names the programs there are.
	res := analyzePath(t, path, fixtureFiles, Options{Attr: attribute.DefaultConfig(), Comms: []string{"nosuch"}})
	var b strings.Builder
	res.Summary.WriteText(&b)
	if !strings.Contains(b.String(), "Selected:     --comm nosuch: no sample matched; the recording's programs: launch, forkexec, exectarget\n") {
		t.Errorf("no match:\n%s", b.String())
	}
	// Without a selection, no Selected line.
	res = analyzePath(t, path, fixtureFiles, Options{Attr: attribute.DefaultConfig()})
	if res.Summary.Selection != nil {
		t.Errorf("selection without options: %+v", res.Summary.Selection)
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// TestSelectPipeline: testdata/pipeline/pipeline.data is a recording of
// sh -c 'produce | consume' (faultline record). Selecting a program keeps
// exactly what perf script shows for it (pipeline.script.txt): its
// page-faults samples and its allocator entries (malloc, calloc, realloc;
// not returns, frees or stack instances).
func TestSelectPipeline(t *testing.T) {
	dir := perftest.Testdata(t, "pipeline")
	script := perftest.ReadScript(t, dir+"/pipeline.script.txt")
	files := symbolize.Config{Symfs: dir + "/symfs", Getenv: func(string) string { return "" }}
	entry := func(ev string) bool {
		for _, fn := range []string{":malloc", ":calloc", ":realloc"} {
			if strings.HasSuffix(ev, fn) {
				return true
			}
		}
		return false
	}
	pidOf := map[string]uint32{}
	for _, s := range script {
		pidOf[s.Comm] = s.Pid // produce and consume: one process each
	}
	count := func(comms []string, pids []uint32) (faults, calls uint64, procs map[uint32]bool) {
		procs = map[uint32]bool{}
		for _, s := range script {
			if (len(comms) > 0 && !slices.Contains(comms, s.Comm)) || (len(pids) > 0 && !slices.Contains(pids, s.Pid)) {
				continue
			}
			procs[s.Pid] = true
			switch {
			case s.Event == "page-faults":
				faults++
			case entry(s.Event):
				calls++
			}
		}
		return faults, calls, procs
	}
	for _, tc := range []struct {
		comms []string
		pids  []uint32
	}{
		{[]string{"consume"}, nil},
		{[]string{"produce"}, nil},
		{[]string{"produce", "consume"}, nil},
		{[]string{"sh"}, nil},
		{nil, []uint32{pidOf["consume"]}},
		{[]string{"sh"}, []uint32{pidOf["produce"]}},
	} {
		res := analyzePath(t, dir+"/pipeline.data", files, Options{Attr: attribute.DefaultConfig(), Comms: tc.comms, Pids: tc.pids})
		faults, calls, procs := count(tc.comms, tc.pids)
		sel := res.Summary.Selection
		if faults == 0 || sel == nil || sel.Faults != faults || res.Summary.Tracker.Faults != faults || sel.Calls != calls || res.Summary.Tracker.Entries != calls || len(sel.Kept) != len(procs) {
			t.Errorf("%v %v: tracker %d faults %d entries, selection %+v; perf script: %d faults, %d entries, processes %v",
				tc.comms, tc.pids, res.Summary.Tracker.Faults, res.Summary.Tracker.Entries, sel, faults, calls, procs)
		}
	}
}
