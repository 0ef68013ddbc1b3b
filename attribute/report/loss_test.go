package report

import (
	"reflect"
	"testing"
)

// TestLossCommentRoundTrip: what LossComment writes ParseLossComment reads
// back, whatever the event names hold, on one line; other comments are not
// losses; the one-comment-per-event lines of older profiles still read.
func TestLossCommentRoundTrip(t *testing.T) {
	events := []EventLoss{
		{Name: "faultline_123:malloc", Role: "alloc-entry", Samples: 110022, Lost: 0},
		{Name: "page-faults/call-graph=no/u", Role: "fault", Samples: 1, Lost: 1 << 40},
		{Name: "odd (name): 3 samples; 4 lost", Role: "stack", Samples: 5, Lost: 6},
		{Name: `q"uo\te`, Role: "r)o; le", Samples: 7, Lost: 8},
	}
	c := LossComment(events)
	got, ok := parseLossComment(c)
	if !ok || !reflect.DeepEqual(got, events) {
		t.Errorf("round trip of %+v: %+v, %v (comment %q)", events, got, ok, c)
	}
	// 110022+1+5+7 samples, 2^40+6+8 lost: the head of the line adds them.
	if want := "faultline: recording lost 1099511627790 of 1099511737825 samples; per event (samples/lost): faultline_123:malloc (alloc-entry) 110022/0; "; c[:len(want)] != want {
		t.Errorf("comment %q, want it to start %q", c, want)
	}
	if LossComment(nil) != "" {
		t.Errorf("LossComment(nil) = %q, want none", LossComment(nil))
	}
	for _, c := range []string{"", "faultline: event x", "faultline: event x (fault): many samples, 0 lost", "hello",
		lossPrefix + "0 of 1" + lossPerEvent + "a (b) 1/x",
		lossPrefix + "0 of 1" + lossPerEvent + "a (b) 1/0; ",
		lossPrefix + "0 of 1" + lossPerEvent + `"a (b) 1/0`} {
		if e, ok := parseLossComment(c); ok {
			t.Errorf("ParseLossComment(%q) = %+v, want not a loss comment", c, e)
		}
	}
	old := "faultline: event page-faults (fault): 5 samples, 3 lost"
	if got := RecordingLosses([]string{"x", old, LossComment(events[:1])}); len(got) != 2 || got[0] != (EventLoss{Name: "page-faults", Role: "fault", Samples: 5, Lost: 3}) || got[1] != events[0] {
		t.Errorf("RecordingLosses = %+v, want the old line's event and the new line's", got)
	}
}
