package perfdata

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// TestFlagWordsMatchPerfEvlist: for every event of every committed
// recording, Attr.Flags.String() and Attr.ReadFormat.String() spell what
// `perf evlist -v` prints for the same attr (its "name: 1" members in
// perf_event.h's order, precise_ip as its value; read_format as-is).
func TestFlagWordsMatchPerfEvlist(t *testing.T) {
	perf := perftest.LookPerf(t, "the attrs (perf evlist -v is the independent reading)")
	member := regexp.MustCompile(`(?:^|, )([a-z_0-9]+): (\d+)`)
	readFmt := regexp.MustCompile(`, read_format: ([A-Z_|]+)`)
	isFlag := map[string]bool{"precise_ip": true}
	for _, n := range attrFlagNames {
		isFlag[n] = n != ""
	}
	checked := 0
	for _, path := range append(perftest.Glob(t, "perf/*.data"), perftest.Glob(t, "mixed/*.data")...) {
		out, _ := perftest.RunPerf(t, perf, "", "evlist", "-v", "-i", path)
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		r, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		// A pipe's attrs arrive as records, all before its first sample.
		for r.Next() {
			if _, ok := r.Record().(*Sample); ok {
				break
			}
		}
		evs := r.Events()
		if len(evs) != len(lines) {
			r.Close()
			t.Fatalf("%s: %d events, perf evlist lists %d", path, len(evs), len(lines))
		}
		for i, ev := range evs {
			// perf names a pipe's events differently ("unknown
			// tracepoint"); the attr's type and config identify it.
			l := lines[i]
			k := strings.Index(l, ": type: ")
			if k < 0 || !strings.HasPrefix(l[k+2:], fmt.Sprintf("type: %d, size: %d, config: %#x,", uint32(ev.Attr.Type), ev.Attr.Size, ev.Attr.Config)) {
				t.Errorf("%s: event %d is %q type %d config %#x, perf evlist's line is %q", path, i, ev.Name, uint32(ev.Attr.Type), ev.Attr.Config, l)
				continue
			}
			var want []string
			for _, m := range member.FindAllStringSubmatch(l[k+2:], -1) {
				switch {
				case !isFlag[m[1]]:
				case m[1] == "precise_ip":
					want = append(want, "precise_ip="+m[2])
				case m[2] == "1":
					want = append(want, m[1])
				}
			}
			if got := ev.Attr.Flags.String(); got != strings.Join(want, "|") {
				t.Errorf("%s %s: flags %#x read %q, perf evlist says %q", path, ev.Name, uint64(ev.Attr.Flags), got, strings.Join(want, "|"))
			}
			wantRF := ""
			if m := readFmt.FindStringSubmatch(l); m != nil {
				wantRF = m[1]
			}
			if got := ev.Attr.ReadFormat.String(); got != wantRF {
				t.Errorf("%s %s: read_format %#x read %q, perf evlist says %q", path, ev.Name, uint64(ev.Attr.ReadFormat), got, wantRF)
			}
			checked++
		}
		r.Close()
	}
	t.Logf("%d attrs checked against perf evlist -v", checked)
}

// TestFlagWordsString covers what the fixtures do not set: precise_ip
// (bits 15–16) in place, unknown bits in hex, the empty set.
func TestFlagWordsString(t *testing.T) {
	for _, c := range []struct {
		f    AttrFlags
		want string
	}{
		{0, ""},
		{AttrDisabled | AttrFreq, "disabled|freq"},
		// precise_ip=2 is 2<<15; bit 14 (watermark) before it, 17 after.
		{1<<14 | 2<<15 | AttrMmapData, "watermark|precise_ip=2|mmap_data"},
		{3 << 15, "precise_ip=3"},
		{AttrSampleIDAll | 1<<38 | 1<<63, "sample_id_all|0x" + strconv.FormatUint(1<<38|1<<63, 16)},
	} {
		if got := c.f.String(); got != c.want {
			t.Errorf("AttrFlags(%#x).String() = %q, want %q", uint64(c.f), got, c.want)
		}
	}
	if p := AttrFlags(2 << 15).PreciseIP(); p != 2 {
		t.Errorf("PreciseIP of 2<<15 = %d", p)
	}
	for _, c := range []struct {
		f    ReadFormat
		want string
	}{
		{0, ""},
		{ReadID | ReadLost, "ID|LOST"},
		{ReadTotalTimeEnabled | ReadTotalTimeRunning | ReadGroup, "TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING|GROUP"},
		{ReadID | 1<<7, "ID|0x80"},
	} {
		if got := c.f.String(); got != c.want {
			t.Errorf("ReadFormat(%#x).String() = %q, want %q", uint64(c.f), got, c.want)
		}
	}
}
