package perfdata

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// readMallocSizes decodes p and returns the malloc event's format-decoded
// sizes (nil format: a failure) and the reader's warnings.
func readMallocSizes(t *testing.T, p []byte) ([]uint64, []error) {
	t.Helper()
	rd, err := New(bytes.NewReader(p), int64(len(p)), nil)
	if err != nil {
		t.Fatalf("%d bytes: %v", len(p), err)
	}
	defer rd.Close()
	evs := rd.Events()
	if len(evs) != 2 || evs[1].Name != "fltest_1:malloc" {
		t.Fatalf("%d bytes: events %v, want page-faults and fltest_1:malloc named", len(p), evs)
	}
	if evs[1].Format == nil || evs[1].Format.Field("size") == nil {
		t.Fatalf("%d bytes: malloc has no format (TRACING_DATA lost with the cut)", len(p))
	}
	size := evs[1].Format.Field("size")
	var sizes []uint64
	for rd.Next() {
		if s, ok := rd.Record().(*Sample); ok && s.Event == evs[1] {
			v, ok := size.Uint64(s.Raw)
			if !ok {
				t.Fatalf("%d bytes: malloc sample without size", len(p))
			}
			sizes = append(sizes, v)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("%d bytes: %v", len(p), err)
	}
	return sizes, rd.Warnings()
}

// TestEarlyFeaturesTruncated cuts an Early recording anywhere after its
// data offset: the event names and formats must survive every cut, and the
// malloc sizes decoded must be a prefix of those written (16, 17, ...: the
// writer's own arithmetic).
func TestEarlyFeaturesTruncated(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run("compress="+strconv.FormatBool(compress), func(t *testing.T) {
			const n = 4000
			wf := writeTestRecordingWith(t, WriterOptions{Compress: compress, Early: true}, false, n)
			full, err := os.ReadFile(wf.path)
			if err != nil {
				t.Fatal(err)
			}
			rd, err := New(bytes.NewReader(full), int64(len(full)), nil)
			if err != nil {
				t.Fatal(err)
			}
			dataOff := rd.Meta().DataOffset
			rd.Close()
			whole, warns := readMallocSizes(t, full)
			if len(whole) != n || len(warns) > 0 {
				t.Fatalf("whole file: %d mallocs (wrote %d), warnings %v", len(whole), n, warns)
			}
			prev := 0
			for _, pct := range []int{0, 10, 50, 90, 99} {
				cut := int(dataOff) + (len(full)-int(dataOff))*pct/100
				got, warns := readMallocSizes(t, full[:cut])
				if len(warns) == 0 {
					t.Errorf("cut at %d%%: no warning about the truncation", pct)
				}
				for i, v := range got {
					if v != wf.sizes[i] {
						t.Fatalf("cut at %d%%: malloc %d has size %d, wrote %d", pct, i, v, wf.sizes[i])
					}
				}
				if len(got) < prev {
					t.Errorf("cut at %d%%: %d mallocs, fewer than a shorter cut's %d", pct, len(got), prev)
				}
				prev = len(got)
			}
			if prev < n*9/10 {
				t.Errorf("cut at 99%%: %d of %d mallocs", prev, n)
			}
		})
	}
}

// TestEarlyFeaturesUnfinished reads a recording whose writer never
// finished (a killed recorder): the header written by NewWriter says "data
// size 0", and the records up to the end decode with their formats.
func TestEarlyFeaturesUnfinished(t *testing.T) {
	td := BuildTracingData(4096, []byte(writerHeaderPage), []byte(writerHeaderEvent),
		[]TraceSystem{{Name: "fltest_1", Formats: [][]byte{[]byte(writerMallocFormat)}}})
	var out bytes.Buffer
	f := &bufferAt{&out}
	flags := AttrSampleIDAll
	events := []WriterEvent{
		{Name: "page-faults", IDs: []uint64{10}, Attr: Attr{Type: TypeSoftware, Config: 2, SamplePeriod: 1, SampleType: wrFaultType, Flags: flags}},
		{Name: "fltest_1:malloc", IDs: []uint64{20}, Attr: Attr{Type: TypeTracepoint, Config: 1234, SamplePeriod: 1, SampleType: wrSampleType, Flags: flags}},
	}
	w, err := NewWriter(f, events, &WriterOptions{Early: true, TracingData: td})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		raw := leBytes(uint16(1234), uint16(0), uint32(7), uint64(0x7f0000001000), uint64(100+i))
		if err := w.WriteRecordParts(uint32(RecordSample), MiscUser, writerSample(20, 0x7f0000001000, 7, 7, uint64(1000+i), 0, raw)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.bw.Flush(); err != nil { // what reached the disk before the kill
		t.Fatal(err)
	}
	sizes, warns := readMallocSizes(t, out.Bytes())
	if len(sizes) != 3 || sizes[0] != 100 || sizes[2] != 102 {
		t.Errorf("sizes %v, want [100 101 102]", sizes)
	}
	if len(warns) == 0 || !strings.Contains(warns[0].Error(), "did not finish") {
		t.Errorf("warnings %v, want the unfinished-header one", warns)
	}
}

// bufferAt is a growing in-memory WriterTarget.
type bufferAt struct{ b *bytes.Buffer }

func (w *bufferAt) Write(p []byte) (int, error) { return w.b.Write(p) }

func (w *bufferAt) WriteAt(p []byte, off int64) (int, error) {
	b := w.b.Bytes()
	if off+int64(len(p)) > int64(len(b)) {
		b = append(b, make([]byte, off+int64(len(p))-int64(len(b)))...)
		w.b.Reset()
		w.b.Write(b)
		b = w.b.Bytes()
	}
	return copy(b[off:], p), nil
}

// TestEarlyFeaturesPerfReads checks that perf itself ignores the early
// block: perf script decodes the raw fields and perf report --stats counts
// every sample of a complete Early file.
func TestEarlyFeaturesPerfReads(t *testing.T) {
	perf := perftest.LookPerf(t, "files with early features")
	for _, compress := range []bool{false, true} {
		t.Run("compress="+strconv.FormatBool(compress), func(t *testing.T) {
			wf := writeTestRecordingWith(t, WriterOptions{Compress: compress, Early: true}, false, 2000)
			run := func(args ...string) string { out, _ := perftest.RunPerf(t, perf, "", args...); return out }
			script := run("script", "-F", "event,trace", "-i", wf.path)
			if got := strings.Count(script, "\n"); got != wf.mallocs+wf.faults {
				t.Errorf("perf script printed %d lines, wrote %d samples", got, wf.mallocs+wf.faults)
			}
			if !strings.Contains(script, "fltest_1:malloc") || !strings.Contains(script, "size=16") {
				t.Errorf("perf script does not decode the malloc event:\n%s", firstLines(script, 5))
			}
			stats := strings.Join(strings.Fields(run("report", "--stats", "-i", wf.path)), " ")
			if !strings.Contains(stats, "SAMPLE events: "+strconv.Itoa(wf.mallocs+wf.faults)) {
				t.Errorf("perf report --stats does not count %d samples:\n%s", wf.mallocs+wf.faults, stats)
			}
		})
	}
}
