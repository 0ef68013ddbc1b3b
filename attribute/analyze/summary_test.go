package analyze

import (
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize/binfile"
)

// TestLossWording: a stack instance's losses lose no call, so the summary
// does not call attribution incomplete for them nor list them as lost
// calls; range-event losses keep that warning, with the flags of the tool
// that recorded the file.
func TestLossWording(t *testing.T) {
	events := func(stackLost, rangeLost uint64) []EventSummary {
		return []EventSummary{
			{Name: "page-faults", Role: RoleFault.String(), Samples: 100},
			{Name: "g:malloc", Role: RoleAllocEntry.String(), Samples: 1000, Lost: rangeLost},
			{Name: "g:malloc", Role: RoleStack.String(), Samples: 30, Lost: stackLost},
		}
	}
	text := func(s *Summary) string {
		var b strings.Builder
		s.WriteText(&b)
		return b.String()
	}
	for _, tc := range []struct {
		name      string
		s         Summary
		want, not []string
	}{
		{"stack only, record", Summary{Events: events(70, 0), FromRecord: true},
			[]string{"Lost samples: no call or fault", "Stack samples lost: 70 of 100 (70.0%; every call kept, those calls get inferred callers); raise --stack-mmap-pages or --stack-every"},
			[]string{"incomplete", "g:malloc 70", "call-graph"}},
		{"range, record", Summary{Events: events(0, 10), FromRecord: true},
			[]string{"Lost samples: g:malloc 10 of 1010 (1.0%)", "record with a larger -m (the call and fault rings)"},
			[]string{"call-graph", "Stack samples lost"}},
		{"range, perf", Summary{Events: events(0, 10)},
			[]string{"Lost samples: g:malloc 10 of 1010", "a larger -m or a smaller --call-graph dwarf size"},
			[]string{"Stack samples lost"}},
		{"in-process shim, record", Summary{Events: []EventSummary{
			{Name: "page-faults", Role: RoleFault.String(), Samples: 100},
			{Name: "faultline:malloc", Role: RoleAllocEntry.String(), Samples: 1000, Lost: 10},
		}, FromRecord: true},
			[]string{"Lost samples: faultline:malloc 10 of 1010 (1.0%)", "the in-process shim could not record calls", "a larger -m does not help"},
			[]string{"record with a larger -m"}},
		{"none", Summary{Events: events(0, 0), FromRecord: true},
			[]string{"Lost samples: none"},
			[]string{"Stack samples lost", "incomplete"}},
	} {
		perftest.CheckText(t, tc.name+": summary", text(&tc.s), tc.want, tc.not)
	}
}

// TestLossCommentsSkipSilentEvents: the profile's one loss comment names
// the events that took part and have samples or losses; a probed function
// the program never called (0 samples, 0 lost) is not named.
func TestLossCommentsSkipSilentEvents(t *testing.T) {
	got := lossComments([]EventSummary{
		{Name: "page-faults", Role: RoleFault.String(), Samples: 5},
		{Name: "g:valloc", Role: RoleAllocEntry.String()},
		{Name: "g:malloc", Role: RoleStack.String(), Lost: 3},
		{Name: "dummy", Role: RoleNone.String(), Samples: 9},
	})
	want := []string{
		"faultline: recording lost 3 of 8 samples; per event (samples/lost): page-faults (fault) 5/0; g:malloc (stack) 0/3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("comments\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestByTouchWithoutFaultStacks: --by touch on a recording whose faults
// carry no stacks (testdata/leaf/default.data: faultline record without
// --fault-stacks; perf evlist -v shows page-faults without CALLCHAIN) says
// so in one line with the flag that records them; a recording with fault
// stacks (perf/basic.plain.data: --call-graph dwarf on page-faults:u) and
// the by-alloc profile say nothing.
func TestByTouchWithoutFaultStacks(t *testing.T) {
	text := func(res *Result) string {
		var b strings.Builder
		res.Summary.WriteText(&b)
		return b.String()
	}
	const line = "By touch:     the recording has no fault stacks, so no fault names the code that touched the memory; record with faultline record --fault-stacks\n"
	if got := text(analyzeDir(t, "leaf", "default", report.ByTouch)); strings.Count(got, "By touch:") != 1 || !strings.Contains(got, line) {
		t.Errorf("leaf by touch:\n%s", got)
	}
	if got := text(analyzeDir(t, "leaf", "default", report.ByAlloc)); strings.Contains(got, "By touch:") {
		t.Errorf("leaf by alloc:\n%s", got)
	}
	res, _ := analyzeFixture(t, "../../testdata/perf/basic.plain.data", report.ByTouch)
	if got := text(res); strings.Contains(got, "By touch:") {
		t.Errorf("basic.plain by touch (faults with stacks):\n%s", got)
	}
}

// TestMismatchWording: refused binaries are counted by frames, named, and
// the fix is said; a file used anyway is named as possibly misnaming.
func TestMismatchWording(t *testing.T) {
	s := Summary{Warnings: []error{
		&binfile.MismatchError{Path: "/app/a", File: "/app/a", Why: "build ID 01, recorded 02"},
		&binfile.MismatchError{Path: "/lib/b.so", File: "/lib/b.so", Why: "inode 3, recorded 4", Used: true},
	}}
	s.Unwind.Refused = 17
	var b strings.Builder
	s.WriteText(&b)
	out := b.String()
	for _, want := range []string{"17 frames left unnamed in a binary whose file here is not the one that ran (/app/a)", "--allow-mismatch", "--symfs",
		"(--allow-mismatch): /lib/b.so; frames may be misnamed"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// TestMapCallsWording: a recording with memory-map call events in which
// the program made no such call says so, not that the calls were not
// recorded (which tells the user to record them).
func TestMapCallsWording(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rs        ResidentSummary
		want, not []string
	}{
		{"calls", ResidentSummary{PeakBytes: 4096, MapCalls: 3, MapEvents: true}, []string{"memory-map calls 3;"}, []string{"none recorded", "no memory-map calls recorded"}},
		{"events, no call", ResidentSummary{PeakBytes: 4096, MapEvents: true}, []string{"memory-map calls: none recorded (the program made none"}, []string{"releases are not seen"}},
		{"no events", ResidentSummary{PeakBytes: 4096}, []string{"no memory-map calls recorded (syscalls:sys_enter_mmap"}, []string{"made none"}},
	} {
		var b strings.Builder
		(&Summary{Resident: tc.rs}).writeResident(&b)
		perftest.CheckText(t, tc.name, b.String(), tc.want, tc.not)
	}
}
