package perfdata

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// readAll decodes path — through NewStream when stream, as `analyze -`
// reads standard input — and prints every record but its offset, then the
// events and the metadata that both modes carry.
func readAll(t *testing.T, path string, stream bool) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rd *Reader
	if stream {
		rd, err = NewStream(struct{ io.Reader }{f}, nil)
	} else {
		rd, err = New(f, mustSize(t, f), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var b strings.Builder
	for rd.Next() {
		switch rec := rd.Record().(type) {
		case *Sample:
			fmt.Fprintf(&b, "sample %s pid=%d tid=%d t=%d cpu=%d ip=%#x addr=%#x raw=%x\n",
				rec.Event.Name, rec.Pid, rec.Tid, rec.Time, rec.CPU, rec.IP, rec.Addr, rec.Raw)
		case *Comm:
			fmt.Fprintf(&b, "comm %d/%d %q exec=%v\n", rec.Pid, rec.Tid, rec.Comm, rec.Exec)
		case *Mmap:
			fmt.Fprintf(&b, "mmap %#x+%#x %s ino=%d prot=%d\n", rec.Addr, rec.Len, rec.Filename, rec.Ino, rec.Prot)
		case *LostSamples:
			fmt.Fprintf(&b, "lost %d\n", rec.Count)
		default:
			if typ := rec.Common().Type; typ < RecordHeaderAttr || typ == RecordFinishedRound {
				fmt.Fprintf(&b, "%s\n", typ)
			}
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if w := rd.Warnings(); len(w) > 0 {
		t.Errorf("%s: warnings %v", path, w)
	}
	for _, ev := range rd.Events() {
		fmt.Fprintf(&b, "event %q %+v ids=%v samples=%d lost=%d format=%v\n", ev.Name, ev.Attr, ev.IDs, ev.Samples, ev.Lost, ev.Format != nil)
	}
	m := rd.Meta()
	fmt.Fprintf(&b, "meta %q %q %q %q cpus=%d/%d mem=%d cmdline=%q time=%d..%d\n", m.Hostname, m.OSRelease, m.Arch,
		m.Version, m.NrCPUsOnline, m.NrCPUsAvail, m.TotalMemKB, m.Cmdline, m.SampleTimeFirst, m.SampleTimeLast)
	for _, id := range m.BuildIDs {
		fmt.Fprintf(&b, "build id %s %s\n", id, id.Filename)
	}
	feats := slices.Clone(m.Features) // pipe mode: in the order they came
	slices.Sort(feats)
	fmt.Fprintf(&b, "compression %+v features %v\n", m.Compression, feats)
	return b.String()
}

func mustSize(t *testing.T, f *os.File) int64 {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestPipeWriterSameAsFile writes one recording in file mode and in pipe
// mode; read back (the pipe one as a stream), both give the same records,
// events and metadata.
func TestPipeWriterSameAsFile(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run("compress="+strconv.FormatBool(compress), func(t *testing.T) {
			const n = 5000 // several compressed chunks
			file := readAll(t, writeTestRecording(t, compress, n).path, false)
			wp := writeTestRecordingMode(t, compress, true, n)
			pipe := readAll(t, wp.path, true)
			if file != pipe {
				t.Errorf("pipe mode reads differently from file mode:\n%s", lineDiff(file, pipe))
			}
			if !strings.Contains(file, "sample fltest_1:malloc") || !strings.Contains(file, "build id deadbeef") {
				t.Errorf("the recording lacks what it was written with:\n%s", firstLines(file, 5))
			}
			if head, err := os.ReadFile(wp.path); err != nil || !bytes.HasPrefix(head, []byte("PERFILE2\x10\x00\x00\x00\x00\x00\x00\x00")) {
				t.Errorf("pipe header: %q %v", head[:min(16, len(head))], err)
			}
		})
	}
}

// lineDiff shows the first lines where a and b differ.
func lineDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < max(len(la), len(lb)) && len(out) < 10; i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n  file: %s\n  pipe: %s", i+1, x, y))
		}
	}
	return strings.Join(out, "\n")
}

// TestPipeWriterPerfReads checks the pipe-mode output with perf 6.1 read
// from standard input, as `perf record -o - | perf script -i -` would:
// perf script prints every sample and decodes the tracepoint field.
// perf report --stats is not asked: in pipe mode it skips neither the
// tracing data nor the COMPRESSED feature (its stats tool leaves both to
// stubs), and fails on perf record's own -o - output with tracepoints or -z.
func TestPipeWriterPerfReads(t *testing.T) {
	perf := perftest.LookPerf(t, "what the pipe writer writes")
	for _, compress := range []bool{false, true} {
		t.Run("compress="+strconv.FormatBool(compress), func(t *testing.T) {
			const n = 3000
			wf := writeTestRecordingMode(t, compress, true, n)
			run := func(args ...string) string { out, _ := perftest.RunPerf(t, perf, wf.path, args...); return out }
			script := run("script", "-F", "comm,tid,time,event", "-i", "-")
			if lines := strings.Count(script, "\n"); lines != wf.mallocs+wf.faults {
				t.Errorf("perf script printed %d lines, wrote %d samples\n%s", lines, wf.mallocs+wf.faults, firstLines(script, 5))
			}
			if !strings.Contains(script, "fltest_1:malloc") || !strings.Contains(script, "page-faults") || !strings.Contains(script, "wtest") {
				t.Errorf("perf script does not name events/comm:\n%s", firstLines(script, 5))
			}
			full := run("script", "-F", "event,trace", "-i", "-")
			if !strings.Contains(full, "size=16") {
				t.Errorf("perf script does not decode size=16:\n%s", firstLines(full, 5))
			}
		})
	}
}

// TestPipeWriterRefuses: what pipe mode cannot do is an error, not a
// recording readers would misread.
func TestPipeWriterRefuses(t *testing.T) {
	ev := []WriterEvent{{Name: "x", IDs: []uint64{1}, Attr: Attr{Type: TypeTracepoint, SampleType: wrSampleType, Flags: AttrSampleIDAll}}}
	var out bytes.Buffer
	if _, err := NewPipeWriter(&out, ev, &WriterFeatures{BuildIDs: []BuildID{{Filename: "/bin/x", ID: []byte{1}}}}, nil); err == nil {
		t.Error("build ids before the data accepted")
	}
	w, err := NewPipeWriter(&out, ev, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(&WriterFeatures{TracingData: []byte("late")}); err == nil || !strings.Contains(err.Error(), "NewPipeWriter") {
		t.Errorf("tracing data after the samples: %v", err)
	}
	// 8 + 128 + 8·8175 bytes do not fit header.size's u16 (perf refuses
	// the same with E2BIG).
	big := []WriterEvent{{Name: "big", IDs: make([]uint64, 8175), Attr: ev[0].Attr}}
	if _, err := NewPipeWriter(&out, big, nil, nil); err == nil || !strings.Contains(err.Error(), "8175 ids") {
		t.Errorf("an attr record past 64 KiB: %v", err)
	}
}

// TestPipeWriterNoAllocs: in pipe mode too, writing a record allocates
// nothing in steady state.
func TestPipeWriterNoAllocs(t *testing.T) {
	for _, compress := range []bool{false, true} {
		w, err := NewPipeWriter(io.Discard, []WriterEvent{{Name: "x", IDs: []uint64{1},
			Attr: Attr{Type: TypeTracepoint, SampleType: wrSampleType, Flags: AttrSampleIDAll}}}, nil, &WriterOptions{Compress: compress})
		if err != nil {
			t.Fatal(err)
		}
		if n := allocsPerRecord(t, w); n >= 0.01 {
			t.Errorf("compress=%v: %.3f allocations per record", compress, n)
		}
	}
}

// allocsPerRecord writes a range event's sample with w until its buffers
// are warm, then returns the allocations per record written.
func allocsPerRecord(t *testing.T, w *Writer) float64 {
	t.Helper()
	body := writerSample(1, 2, 3, 3, 4, 0, make([]byte, 24))
	for i := 0; i < 10000; i++ {
		w.WriteRecordParts(uint32(RecordSample), MiscUser, body)
	}
	return testing.AllocsPerRun(20000, func() {
		if err := w.WriteRecordParts(uint32(RecordSample), MiscUser, body); err != nil {
			t.Fatal(err)
		}
	})
}
