package report

import "testing"

// TestLossCommentRoundTrip: what LossComment writes ParseLossComment reads
// back, whatever the event name holds; other comments are not losses.
func TestLossCommentRoundTrip(t *testing.T) {
	for _, e := range []EventLoss{
		{Name: "faultline_123:malloc", Role: "alloc-entry", Samples: 110022, Lost: 0},
		{Name: "page-faults/call-graph=no/u", Role: "fault", Samples: 1, Lost: 1 << 40},
		{Name: "odd (name): 3 samples, 4 lost", Role: "stack", Samples: 5, Lost: 6},
	} {
		got, ok := ParseLossComment(LossComment(e))
		if !ok || got != e {
			t.Errorf("round trip of %+v: %+v, %v (comment %q)", e, got, ok, LossComment(e))
		}
	}
	for _, c := range []string{"", "faultline: event x", "faultline: event x (fault): many samples, 0 lost", "hello"} {
		if e, ok := ParseLossComment(c); ok {
			t.Errorf("ParseLossComment(%q) = %+v, want not a loss comment", c, e)
		}
	}
	if n := len(RecordingLosses([]string{"x", LossComment(EventLoss{Name: "a", Role: "free"})})); n != 1 {
		t.Errorf("RecordingLosses found %d, want 1", n)
	}
}
