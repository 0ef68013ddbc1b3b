package perfdata

import "testing"

// TestNames checks the String methods against the names perf prints (perf
// report --stats for record types, --header-only for sample_type bits and
// features, perf list for software events).
func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{RecordLostSamples.String(), "LOST_SAMPLES"},
		{RecordType(200).String(), "UNKNOWN_200"},
		{SampleFormat(SampleIP | SampleTID | SampleTime | SampleAddr | SampleCallchain).String(), "IP|TID|TIME|ADDR|CALLCHAIN"},
		{SampleFormat(SampleIdentifier | 1<<40).String(), "IDENTIFIER|0x10000000000"},
		{TypeTracepoint.String(), "TRACEPOINT"},
		{EventType(9).String(), "9"},
		{SWPageFaultsMin.String(), "minor-faults"},
		{SoftwareEvent(42).String(), "sw-42"},
		{FeatCompressed.String(), "COMPRESSED"},
		{Feature(99).String(), "FEATURE_99"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if !SWPageFaultsMaj.IsPageFault() || SWDummy.IsPageFault() {
		t.Error("IsPageFault")
	}
	for _, c := range []struct {
		in   string
		want bool
	}{{"PERFILE2\x68", true}, {"2ELIFREP", true}, {"PERFILE", false}, {"PERFILE1", false}, {"", false}} {
		if IsPerfData([]byte(c.in)) != c.want {
			t.Errorf("IsPerfData(%q) = %v", c.in, !c.want)
		}
	}
}
