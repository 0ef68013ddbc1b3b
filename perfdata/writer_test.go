package perfdata

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// writerMallocFormat is a uprobe format as tracefs shows it (kernel 6.x),
// for the event id 1234.
const writerMallocFormat = `name: malloc
ID: 1234
format:
` + traceCommonFields + `	field:unsigned long __probe_ip;	offset:8;	size:8;	signed:0;
	field:u64 size;	offset:16;	size:8;	signed:0;

print fmt: "(%lx) size=%llu", REC->__probe_ip, REC->size
`

const writerHeaderPage = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n" +
	"\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n" +
	"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n" +
	"\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n"

const writerHeaderEvent = "# compressed entry header\n\ttype_len    :    5 bits\n\ttime_delta  :   27 bits\n\tarray       :   32 bits\n\n" +
	"\tpadding     : type == 29\n\ttime_extend : type == 30\n\ttime_stamp : type == 31\n\tdata max type_len  == 28\n"

// writerSample builds a SAMPLE with IDENTIFIER|IP|TID|TIME|CPU|RAW (the
// layout of a range event), fields in the order perf_event.h lists them.
func writerSample(id, ip uint64, pid, tid uint32, time uint64, cpu uint32, raw []byte) []byte {
	// u32 size, raw bytes, padded so the whole stays 8-aligned (the
	// kernel pads the raw payload, size includes the padding).
	n := len(raw)
	for (4+n)%8 != 0 {
		n++
	}
	b := leBytes(id, ip, pid, tid, time, cpu, uint32(0), uint32(n))
	b = append(b, raw...)
	return append(b, make([]byte, n-len(raw))...)
}

// writerFaultSample is IDENTIFIER|IP|TID|TIME|ADDR|CPU (a page fault).
func writerFaultSample(id, ip uint64, pid, tid uint32, time, addr uint64, cpu uint32) []byte {
	return leBytes(id, ip, pid, tid, time, addr, cpu, uint32(0))
}

// sampleIDTrailer is the sample_id_all trailer of TID|TIME|CPU|IDENTIFIER.
func sampleIDTrailer(pid, tid uint32, time, id uint64, cpu uint32) []byte {
	return leBytes(pid, tid, time, cpu, uint32(0), id)
}

// leBytes lays out fixed-size values little-endian, one after another.
func leBytes(vs ...any) []byte {
	var b []byte
	for _, v := range vs {
		var err error
		if b, err = binary.Append(b, binary.LittleEndian, v); err != nil {
			panic(err) // a value of no fixed size: a mistake in the test
		}
	}
	return b
}

const (
	wrSampleType = SampleIdentifier | SampleIP | SampleTID | SampleTime | SampleCPU | SampleRaw
	wrFaultType  = SampleIdentifier | SampleIP | SampleTID | SampleTime | SampleAddr | SampleCPU
)

type writtenFile struct {
	path                      string
	mallocs, faults, lostRecs int
	sizes                     []uint64
}

// writeTestRecording writes a small recording with the writer: COMM, MMAP2
// of a real binary, n malloc samples, n/2 faults, one LOST_SAMPLES of 3.
func writeTestRecording(t *testing.T, compress bool, n int) writtenFile {
	t.Helper()
	return writeTestRecordingWith(t, WriterOptions{Compress: compress}, false, n)
}

// writeTestRecordingMode is writeTestRecording in file or pipe mode.
func writeTestRecordingMode(t *testing.T, compress, pipe bool, n int) writtenFile {
	t.Helper()
	return writeTestRecordingWith(t, WriterOptions{Compress: compress}, pipe, n)
}

// writeTestRecordingWith is writeTestRecording with the writer's options
// and mode; with opts.Early it stores the tracing data early as well.
func writeTestRecordingWith(t *testing.T, opts WriterOptions, pipe bool, n int) writtenFile {
	t.Helper()
	f, path := perftest.Create(t, "w.data")
	flags := AttrSampleIDAll | AttrDisabled | AttrInherit
	events := []WriterEvent{
		{Name: "page-faults", IDs: []uint64{10, 11},
			Attr: Attr{Type: TypeSoftware, Config: 2, SamplePeriod: 1, SampleType: wrFaultType,
				Flags: flags | AttrExcludeKernel | AttrMmap | AttrComm | AttrMmap2}},
		{Name: "fltest_1:malloc", IDs: []uint64{20, 21},
			Attr: Attr{Type: TypeTracepoint, Config: 1234, SamplePeriod: 1, SampleType: wrSampleType, Flags: flags}},
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	td := BuildTracingData(4096, []byte(writerHeaderPage), []byte(writerHeaderEvent),
		[]TraceSystem{{Name: "fltest_1", Formats: [][]byte{[]byte(writerMallocFormat)}}})
	feats := &WriterFeatures{
		TracingData: td, Hostname: "wtest-host", OSRelease: "6.1.0-test", Arch: "x86_64",
		Version: "faultline-test", NrCPUsAvail: 2, NrCPUsOnline: 2, TotalMemKB: 1 << 20,
		Cmdline: []string{"faultline", "record", "--", "wtest"},
	}
	if opts.Early {
		opts.TracingData = td
	}
	var w *Writer
	if pipe {
		head := *feats
		w, err = NewPipeWriter(f, events, &head, &opts)
	} else {
		w, err = NewWriter(f, events, &opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	const pid = 4242
	// COMM "wtest" with exec flag.
	comm := le.AppendUint32(nil, pid)
	comm = le.AppendUint32(comm, pid)
	comm = append(comm, "wtest\x00\x00\x00"...)
	comm = append(comm, sampleIDTrailer(pid, pid, 1000, 10, 0)...)
	if err := w.WriteRecordParts(uint32(RecordComm), MiscUser|MiscCommExec, comm); err != nil {
		t.Fatal(err)
	}
	// MMAP2 of the test binary, executable.
	var mm []byte
	mm = le.AppendUint32(mm, pid)
	mm = le.AppendUint32(mm, pid)
	mm = le.AppendUint64(mm, 0x400000)
	mm = le.AppendUint64(mm, 0x100000)
	mm = le.AppendUint64(mm, 0)
	mm = le.AppendUint32(mm, 8)
	mm = le.AppendUint32(mm, 1)
	mm = le.AppendUint64(mm, 77)
	mm = le.AppendUint64(mm, 0)
	mm = le.AppendUint32(mm, 5) // PROT_READ|PROT_EXEC
	mm = le.AppendUint32(mm, 2) // MAP_PRIVATE
	name := []byte(exe + "\x00")
	for len(name)%8 != 0 {
		name = append(name, 0)
	}
	mm = append(mm, name...)
	mm = append(mm, sampleIDTrailer(pid, pid, 1001, 10, 0)...)
	if err := w.WriteRecordParts(uint32(RecordMmap2), MiscUser, mm); err != nil {
		t.Fatal(err)
	}
	wf := writtenFile{path: path}
	for i := 0; i < n; i++ {
		size := uint64(16 + i)
		wf.sizes = append(wf.sizes, size)
		raw := make([]byte, 24)
		le.PutUint16(raw[0:], 1234)
		le.PutUint32(raw[4:], pid)
		le.PutUint64(raw[8:], 0x7f0000001000)
		le.PutUint64(raw[16:], size)
		cpu := uint32(i % 2)
		body := writerSample(20+uint64(cpu), 0x7f0000001000, pid, pid, 2000+uint64(3*i), cpu, raw)
		if err := w.WriteRecordParts(uint32(RecordSample), MiscUser, body); err != nil {
			t.Fatal(err)
		}
		wf.mallocs++
		if i%2 == 0 {
			body := writerFaultSample(10+uint64(cpu), 0x401000, pid, pid, 2001+uint64(3*i), 0x10000000+uint64(i)*4096, cpu)
			if err := w.WriteRecordParts(uint32(RecordSample), MiscUser, body); err != nil {
				t.Fatal(err)
			}
			wf.faults++
		}
		if i%1000 == 999 {
			if err := w.WriteRecordParts(uint32(RecordFinishedRound), 0, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// LOST_SAMPLES {u64 lost} for the malloc event.
	lost := le.AppendUint64(nil, 3)
	lost = append(lost, sampleIDTrailer(pid, pid, 2000+uint64(3*n), 20, 0)...)
	if err := w.WriteRecordParts(uint32(RecordLostSamples), 0, lost); err != nil {
		t.Fatal(err)
	}
	wf.lostRecs = 1
	feats.BuildIDs = []BuildID{{Pid: -1, Misc: MiscUser, Filename: exe,
		ID: []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}}
	feats.SampleTimeFirst, feats.SampleTimeLast = 2000, 2000+uint64(3*n)
	if err := w.Finish(feats); err != nil {
		t.Fatal(err)
	}
	return wf
}

// TestWriterRoundTrip writes a recording and reads it back with our reader:
// every value read must be the one written.
func TestWriterRoundTrip(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run("compress="+strconv.FormatBool(compress), func(t *testing.T) {
			const n = 5000 // enough records for several compressed chunks
			wf := writeTestRecording(t, compress, n)
			rd, err := Open(wf.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			m := rd.Meta()
			if m.Hostname != "wtest-host" || m.OSRelease != "6.1.0-test" || m.Arch != "x86_64" || m.NrCPUsOnline != 2 || m.TotalMemKB != 1<<20 {
				t.Errorf("meta = %+v", m)
			}
			if c := m.Compression; compress && (c.Type != 1 || c.Level != 3 || c.Ratio < 2 || c.MmapLen != compressMmapLen) {
				t.Errorf("COMPRESSED feature %+v", c)
			}
			if strings.Join(m.Cmdline, " ") != "faultline record -- wtest" {
				t.Errorf("cmdline %q", m.Cmdline)
			}
			if len(m.BuildIDs) != 1 || m.BuildIDs[0].String() != "deadbeef0102030405060708090a0b0c0d0e0f10" {
				t.Errorf("build ids %+v", m.BuildIDs)
			}
			if m.SampleTimeFirst != 2000 || m.SampleTimeLast != 2000+3*n {
				t.Errorf("sample time %d..%d", m.SampleTimeFirst, m.SampleTimeLast)
			}
			evs := rd.Events()
			if len(evs) != 2 || evs[0].Name != "page-faults" || evs[1].Name != "fltest_1:malloc" {
				t.Fatalf("events %v", evs)
			}
			if evs[1].Format == nil || evs[1].Format.Field("size") == nil {
				t.Fatalf("malloc has no format with size: %+v", evs[1].Format)
			}
			if evs[1].Attr.SampleType != wrSampleType || evs[0].Attr.Flags&AttrMmap2 == 0 || len(evs[1].IDs) != 2 || evs[1].IDs[1] != 21 {
				t.Errorf("attr/ids did not survive: %+v %v", evs[1].Attr, evs[1].IDs)
			}
			size := evs[1].Format.Field("size")
			var mallocs, faults, comms, mmaps int
			var lost uint64
			for rd.Next() {
				switch rec := rd.Record().(type) {
				case *Sample:
					switch rec.Event {
					case evs[1]:
						v, ok := size.Uint64(rec.Raw)
						if !ok || mallocs >= len(wf.sizes) || v != wf.sizes[mallocs] {
							t.Fatalf("malloc %d: size %d ok=%v", mallocs, v, ok)
						}
						mallocs++
					case evs[0]:
						faults++
					}
				case *Comm:
					comms++
					if rec.Comm != "wtest" || !rec.Exec {
						t.Errorf("comm %+v", rec)
					}
				case *Mmap:
					mmaps++
					if rec.Addr != 0x400000 || rec.Ino != 77 || rec.Prot != 5 {
						t.Errorf("mmap %+v", rec)
					}
				case *LostSamples:
					lost += rec.Count
				}
			}
			if err := rd.Err(); err != nil {
				t.Fatal(err)
			}
			if mallocs != wf.mallocs || faults != wf.faults || comms != 1 || mmaps != 1 || lost != 3 || evs[1].Lost != 3 {
				t.Errorf("read %d mallocs, %d faults, %d comm, %d mmap, lost %d (event %d); wrote %d, %d, 1, 1, 3",
					mallocs, faults, comms, mmaps, lost, evs[1].Lost, wf.mallocs, wf.faults)
			}
			if w := rd.Warnings(); len(w) > 0 {
				t.Errorf("warnings: %v", w)
			}
		})
	}
}

// TestWriterPerfReads checks the written file with perf itself: perf
// script prints every sample, perf report --stats counts them per event,
// perf buildid-list lists the build id written.
func TestWriterPerfReads(t *testing.T) {
	perf := perftest.LookPerf(t, "what the writer writes")
	for _, compress := range []bool{false, true} {
		t.Run("compress="+strconv.FormatBool(compress), func(t *testing.T) {
			const n = 3000
			wf := writeTestRecording(t, compress, n)
			run := func(args ...string) string { out, _ := perftest.RunPerf(t, perf, "", args...); return out }
			script := run("script", "-F", "comm,tid,time,event", "-i", wf.path)
			lines := strings.Count(script, "\n")
			if lines != wf.mallocs+wf.faults {
				t.Errorf("perf script printed %d lines, wrote %d samples\n%s", lines, wf.mallocs+wf.faults, firstLines(script, 5))
			}
			if !strings.Contains(script, "fltest_1:malloc") || !strings.Contains(script, "page-faults") || !strings.Contains(script, "wtest") {
				t.Errorf("perf script does not name events/comm:\n%s", firstLines(script, 5))
			}
			// The raw field decodes through the tracing data's format.
			full := run("script", "-F", "event,trace", "-i", wf.path)
			if !strings.Contains(full, "size=16") {
				t.Errorf("perf script does not decode size=16:\n%s", firstLines(full, 5))
			}
			stats := run("report", "--stats", "-i", wf.path)
			if !strings.Contains(stats, "SAMPLE events: "+strconv.Itoa(wf.mallocs+wf.faults)) &&
				!strings.Contains(strings.Join(strings.Fields(stats), " "), "SAMPLE events: "+strconv.Itoa(wf.mallocs+wf.faults)) {
				t.Errorf("perf report --stats does not count %d samples:\n%s", wf.mallocs+wf.faults, stats)
			}
			if !strings.Contains(strings.Join(strings.Fields(stats), " "), "LOST_SAMPLES events: 1") {
				t.Errorf("perf report --stats does not show the LOST_SAMPLES record:\n%s", stats)
			}
			if !compress {
				ids := run("buildid-list", "-i", wf.path)
				if !strings.Contains(ids, "deadbeef0102030405060708090a0b0c0d0e0f10") {
					t.Errorf("perf buildid-list: %q", ids)
				}
			}
		})
	}
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	if len(l) > n {
		l = l[:n]
	}
	return strings.Join(l, "\n")
}

// TestWriterNoAllocs: writing a record allocates nothing in steady state
// (the recorder calls WriteRecordParts once per record it drains).
func TestWriterNoAllocs(t *testing.T) {
	for _, compress := range []bool{false, true} {
		f, _ := perftest.Create(t, "a.data")
		w, err := NewWriter(f, []WriterEvent{{Name: "x", IDs: []uint64{1},
			Attr: Attr{Type: TypeTracepoint, SampleType: wrSampleType, Flags: AttrSampleIDAll}}}, &WriterOptions{Compress: compress})
		if err != nil {
			t.Fatal(err)
		}
		// A compressed flush every 32 KiB may allocate inside zstd; per
		// record that rounds to zero.
		if n := allocsPerRecord(t, w); n >= 0.01 {
			t.Errorf("compress=%v: %.3f allocations per record", compress, n)
		}
	}
}

// BenchmarkWriterRecord measures the writer's cost per record of a range
// event's size (the recorder writes every allocator call through it).
func BenchmarkWriterRecord(b *testing.B) {
	for _, compress := range []bool{false, true} {
		b.Run("compress="+strconv.FormatBool(compress), func(b *testing.B) {
			f, _ := perftest.Create(b, "a.data")
			w, err := NewWriter(f, []WriterEvent{{Name: "x", IDs: []uint64{1},
				Attr: Attr{Type: TypeTracepoint, SampleType: wrSampleType, Flags: AttrSampleIDAll}}}, &WriterOptions{Compress: compress})
			if err != nil {
				b.Fatal(err)
			}
			body := writerSample(1, 2, 3, 3, 4, 0, make([]byte, 24))
			b.ReportAllocs()
			b.SetBytes(int64(len(body) + 8))
			for i := 0; i < b.N; i++ {
				if err := w.WriteRecordParts(uint32(RecordSample), MiscUser, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
