package analyze

import (
	"strings"
	"testing"
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
		{"none", Summary{Events: events(0, 0), FromRecord: true},
			[]string{"Lost samples: none"},
			[]string{"Stack samples lost", "incomplete"}},
	} {
		got := text(&tc.s)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: summary lacks %q:\n%s", tc.name, w, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: summary has %q:\n%s", tc.name, n, got)
			}
		}
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
