package perftest

import (
	"strings"
	"testing"
)

// The text is two samples of testdata/perf/basic.plain.script.txt (perf
// 6.1), the second with an inlined frame as perf prints it without
// --no-inline.
const script = `launch 14764/14764  2110.278849:             page-faults:u:           4015e0 _start (/tmp/faultline-fixtures/bin/launch)
	            15e0 _start (/tmp/faultline-fixtures/bin/launch)

basic 14765/14766  2110.300000123: probe_libc:malloc: (7f0000001234) size=64
	           2a3f0 inner (inlined)
	           2a3f0 outer (/tmp/faultline-fixtures/bin/basic)
	ffffffffffffffff [unknown] ([unknown])
`

func TestParseScript(t *testing.T) {
	s, err := ParseScript(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 {
		t.Fatalf("%d samples, want 2", len(s))
	}
	a, b := s[0], s[1]
	if a.Line != 1 || a.Comm != "launch" || a.Pid != 14764 || a.Tid != 14764 || a.Time != "2110.278849" || a.Event != "page-faults:u" ||
		a.Rest != "4015e0 _start (/tmp/faultline-fixtures/bin/launch)" || len(a.Frames) != 1 || a.Frames[0] != (Frame{0x15e0, "_start", "/tmp/faultline-fixtures/bin/launch"}) {
		t.Errorf("first sample %+v", a)
	}
	if b.Line != 4 || b.Key() != "14765/14766 2110.300000123 probe_libc:malloc" || len(b.Frames) != 3 ||
		b.Frames[0] != (Frame{0x2a3f0, "inner", "inlined"}) || b.Frames[2].Addr != ^uint64(0) {
		t.Errorf("second sample %+v", b)
	}
	if _, err := ParseScript(strings.NewReader("not a header\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad header: err %v, want one naming line 1", err)
	}
}
