package perfdata

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/perfdata/schema"
)

// packTestFormats: a whole call (five words), a free (one word) and an
// event with a signed 4-byte field (raw payload padded), as the in-process
// recorder describes its events.
var packTestFormats = []string{
	"name: malloc__call\nID: 65280\nformat:\n" + traceCommonFields +
		"\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n" +
		"\tfield:u64 size;\toffset:16;\tsize:8;\tsigned:0;\n" +
		"\tfield:unsigned long __probe_ret_ip;\toffset:24;\tsize:8;\tsigned:0;\n" +
		"\tfield:u64 ptr;\toffset:32;\tsize:8;\tsigned:0;\n" +
		"\tfield:u64 hdr;\toffset:40;\tsize:8;\tsigned:0;\n\nprint fmt: \"size=%Lu\", REC->size\n",
	"name: free\nID: 65281\nformat:\n" + traceCommonFields +
		"\tfield:u64 ptr;\toffset:8;\tsize:8;\tsigned:0;\n\nprint fmt: \"ptr=%Lu\", REC->ptr\n",
	"name: posix_memalign__return\nID: 65282\nformat:\n" + traceCommonFields +
		"\tfield:u64 ptr;\toffset:8;\tsize:8;\tsigned:0;\n" +
		"\tfield:s32 ret;\toffset:16;\tsize:4;\tsigned:1;\n\nprint fmt: \"ret=%d\", REC->ret\n",
}

const packTestPackedID, packTestPackedType = 1<<56 + 3, 65283

// packTestSample is one sample of the test's events: event index, thread,
// time, field values.
type packTestSample struct {
	ev     int
	tid    uint32
	t      uint64
	fields []uint64
}

// packTestSamples makes n samples of two threads of one process with
// allocator-like values (sizes, pointers and sites that repeat or step),
// some far apart, and page faults between them.
func packTestSamples(n int) []packTestSample {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []packTestSample
	t := uint64(1_000_000)
	for i := 0; i < n; i++ {
		t += 40 + rng.Uint64N(200)
		tid := uint32(100 + i%2)
		switch k := rng.IntN(10); {
		case k < 5:
			size := 16 + rng.Uint64N(500)
			ptr := 0x5555_0000_0000 + rng.Uint64N(1<<20)*16
			out = append(out, packTestSample{0, tid, t, []uint64{0x7f00_0001_2340, size, 0x5555_5555_1000 + rng.Uint64N(3)*0x40, ptr, (size+23)&^15 | 1}})
		case k < 9:
			out = append(out, packTestSample{1, tid, t, []uint64{0x5555_0000_0000 + rng.Uint64N(1<<20)*16}})
		default:
			out = append(out, packTestSample{2, tid, t, []uint64{rng.Uint64() &^ 63, uint64(rng.Int32N(30)) - 15}})
		}
		if k := rng.IntN(7); k == 0 {
			t += 3
			out = append(out, packTestSample{3, tid, t, []uint64{0x5555_0000_0000 + rng.Uint64N(1<<20)*4096}})
		}
	}
	return out
}

// packTestRows makes writePackTest write the row layout, as files
// written before the column layout hold it.
var packTestRows bool

// writePackTest writes the samples one by one or through a Packer, with a
// FINISHED_ROUND every round samples.
func writePackTest(t testing.TB, samples []packTestSample, packed, compress bool, round int) string {
	t.Helper()
	f, path := perftest.Create(t, "p.data")
	flags := AttrSampleIDAll | AttrDisabled
	events := []WriterEvent{{Name: "page-faults", IDs: []uint64{10},
		Attr: Attr{Type: TypeSoftware, Config: 2, SamplePeriod: 1, SampleType: wrFaultType, Flags: flags | AttrMmap | AttrComm | AttrMmap2}}}
	var formats [][]byte
	var tfs []*TraceFormat
	packedFmt := PackedFormat(packTestPackedType)
	if packTestRows {
		packedFmt = packedRowFormat(packTestPackedType)
	}
	for i, ft := range append(packTestFormats, string(packedFmt)) {
		name := ft[len("name: "):strings.IndexByte(ft, '\n')]
		events = append(events, WriterEvent{Name: schema.System + ":" + name, IDs: []uint64{1<<56 + uint64(i)},
			Attr: Attr{Type: TypeTracepoint, Config: 65280 + uint64(i), SamplePeriod: 1, SampleType: packedType, Flags: flags}})
		formats = append(formats, []byte(ft))
		tf, err := ParseTraceFormat(schema.System, []byte(ft))
		if err != nil {
			t.Fatal(err)
		}
		tfs = append(tfs, tf)
	}
	td := BuildTracingData(4096, []byte(writerHeaderPage), []byte(writerHeaderEvent), []TraceSystem{{Name: schema.System, Formats: formats}})
	w, err := NewWriter(f, events, &WriterOptions{Compress: compress})
	if err != nil {
		t.Fatal(err)
	}
	pk := NewPacker(packTestPackedID, packTestPackedType)
	pk.rowLayout = packTestRows
	// Each event is added at its first sample, as the in-process recorder
	// adds them: the later ones while batches hold samples of the first.
	added := make([]bool, len(packTestFormats))
	le := binary.LittleEndian
	const pid = 4242
	for i, s := range samples {
		if s.ev == 3 {
			if err := w.WriteRecordParts(uint32(RecordSample), MiscUser, writerFaultSample(10, 0x401000, pid, s.tid, s.t, s.fields[0], 0)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if packed && !added[s.ev] {
			if !pk.AddEvent(1<<56+uint64(s.ev), &events[1+s.ev].Attr, tfs[s.ev]) {
				t.Fatalf("event %d cannot be packed", s.ev)
			}
			added[s.ev] = true
		}
		raw := le.AppendUint16(nil, uint16(65280+s.ev))
		raw = append(raw, 0, 0)
		raw = le.AppendUint32(raw, s.tid)
		for k, v := range s.fields {
			if tfs[s.ev].Fields[4+k].Size == 4 {
				raw = le.AppendUint32(raw, uint32(v))
			} else {
				raw = le.AppendUint64(raw, v)
			}
		}
		n := len(raw)
		for (4+n)%8 != 0 {
			n++
		}
		body := leBytes(uint64(1<<56+s.ev), uint32(pid), s.tid, s.t, uint32(n))
		body = append(append(body, raw...), make([]byte, n-len(raw))...)
		switch {
		case packed && i%2 == 1:
			// What a recorder that knows the values calls: the same
			// sample without building it.
			err = pk.AddFields(w, MiscUser, uint64(1<<56+s.ev), pid, s.tid, s.t, s.fields)
		case packed:
			err = pk.Add(w, MiscUser, body)
		default:
			err = w.WriteRecordParts(uint32(RecordSample), MiscUser, body)
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%round == round-1 {
			if err := pk.Flush(w); err != nil {
				t.Fatal(err)
			}
			if err := w.WriteRecordParts(uint32(RecordFinishedRound), 0, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pk.Flush(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(&WriterFeatures{TracingData: td}); err != nil {
		t.Fatal(err)
	}
	return path
}

// readPackTest lists every record a reader delivers: type, and for a
// sample its event, thread, time and raw payload.
func readPackTest(t *testing.T, path string) ([]string, *Reader) {
	t.Helper()
	rd, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	var out []string
	for rd.Next() {
		switch rec := rd.Record().(type) {
		case *Sample:
			out = append(out, fmt.Sprintf("%s %d/%d %d %x %x", rec.Event.Name, rec.Pid, rec.Tid, rec.Time, rec.Raw, rec.Addr))
		default:
			out = append(out, rec.Common().Type.String())
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return out, rd
}

// TestPackedRoundTrip: samples written through a Packer (as built
// samples, Add, and as values, AddFields) read back exactly as the same
// samples written one by one (event, thread, time, raw payload
// byte for byte, in the same order among the page faults), in a fraction
// of the bytes.
func TestPackedRoundTrip(t *testing.T) {
	samples := packTestSamples(20000)
	for _, tc := range []struct{ rows, compress bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("rows=%v/compress=%v", tc.rows, tc.compress), func(t *testing.T) {
			packTestRows = tc.rows
			defer func() { packTestRows = false }()
			compress := tc.compress
			plain, _ := readPackTest(t, writePackTest(t, samples, false, compress, 3000))
			ppath := writePackTest(t, samples, true, compress, 3000)
			packed, rd := readPackTest(t, ppath)
			if len(rd.Warnings()) > 0 {
				t.Errorf("warnings: %v", rd.Warnings())
			}
			if len(plain) != len(packed) {
				t.Fatalf("%d records one by one, %d packed", len(plain), len(packed))
			}
			for i := range plain {
				if plain[i] != packed[i] {
					t.Fatalf("record %d:\none by one %s\npacked     %s", i, plain[i], packed[i])
				}
			}
			if rd.Stats().Packed == 0 {
				t.Error("no packed sample read")
			}
		})
	}
	// The bytes: a whole call is 88 bytes one by one (header 8, id, tid,
	// time 24, raw size 4, common fields 8, five words 40, padding 4).
	one, pk := fileSize(t, writePackTest(t, samples, false, false, 3000)), fileSize(t, writePackTest(t, samples, true, false, 3000))
	t.Logf("%d bytes one by one, %d packed (%d samples)", one, pk, len(samples))
	if pk*3 > one {
		t.Errorf("packed file %d bytes, not a third of %d", pk, one)
	}
	// Compressed, the column layout (each field's differences together)
	// is smaller than the row layout (each sample's together): its
	// columns hold runs of like bytes.
	packTestRows = true
	rows := fileSize(t, writePackTest(t, samples, true, true, 3000))
	packTestRows = false
	cols := fileSize(t, writePackTest(t, samples, true, true, 3000))
	t.Logf("compressed: %d bytes in columns, %d in rows", cols, rows)
	if cols >= rows {
		t.Errorf("compressed: the column layout's file %d bytes, the row layout's %d", cols, rows)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestPackedPerfReads: perf reads a file with packed samples: report
// --stats counts them under faultline:packed and script prints them.
func TestPackedPerfReads(t *testing.T) {
	perf := perftest.LookPerf(t, "packed samples")
	path := writePackTest(t, packTestSamples(2000), true, true, 500)
	_, rd := readPackTest(t, path)
	var packed uint64
	for _, ev := range rd.Events() {
		if ev.Name == schema.System+":"+schema.PackedEvent {
			packed = ev.Samples
		}
	}
	stats, _ := perftest.RunPerf(t, perf, "", "report", "--stats", "-i", path)
	flat := strings.Join(strings.Fields(stats), " ")
	if want := fmt.Sprintf("%s:%s stats: SAMPLE events: %d", schema.System, schema.PackedEvent, packed); packed == 0 || !strings.Contains(flat, want) {
		t.Errorf("perf report --stats does not say %q:\n%s", want, stats)
	}
	script, _ := perftest.RunPerf(t, perf, "", "script", "-F", "tid,time,event,trace", "-i", path)
	if n := strings.Count(script, "faultline:packed:"); uint64(n) != packed || !strings.Contains(script, "count=") {
		t.Errorf("perf script printed %d packed samples of %d:\n%s", n, packed, firstLines(script, 5))
	}
}

// TestPackedCorrupt: a packed sample whose bytes are cut or changed yields
// the samples before the damage and a warning, never a panic.
func TestPackedCorrupt(t *testing.T) {
	for _, rows := range []bool{false, true} {
		packTestRows = rows
		readCorrupted(t, writePackTest(t, packTestSamples(300), true, false, 1000), 3, 300)
	}
	packTestRows = false
}

// readCorrupted reads n copies of the file at path, each with one to
// four bytes changed at random (PCG seeded with seed and seed+1): a
// panic fails the test, errors and warnings are what it expects.
func readCorrupted(t *testing.T, path string, seed uint64, n int) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := 0; i < n; i++ {
		b := bytes.Clone(data)
		for k := 0; k < 1+i%4; k++ {
			b[rng.IntN(len(b))] = byte(rng.Uint32())
		}
		rd, err := New(bytes.NewReader(b), int64(len(b)), nil)
		if err != nil {
			continue
		}
		for rd.Next() {
			_ = fmt.Sprint(rd.Record())
		}
		rd.Close()
	}
}

// TestPackedAllocsDoNotGrow: reading packed samples allocates nothing per
// sample (the expanded samples live in the reader's arena), and neither
// does packing them.
func TestPackedAllocsDoNotGrow(t *testing.T) {
	small := writePackTest(t, packTestSamples(5000), true, false, 1000)
	big := writePackTest(t, packTestSamples(50000), true, false, 1000)
	a, b := decodeAllocs(t, small, TimeOrder, false), decodeAllocs(t, big, TimeOrder, false)
	t.Logf("reading: %.0f allocations for 5000 samples, %.0f for 50000", a, b)
	if b > 2*a+50 {
		t.Errorf("reading packed samples: %.0f allocations for 5000 samples, %.0f for 50000", a, b)
	}
	w, pk, bodies := packBenchSetup(t)
	for _, body := range bodies {
		if err := pk.Add(w, MiscUser, body); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(20000, func() {
		if err := pk.Add(w, MiscUser, bodies[i%len(bodies)]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs > 0 {
		t.Errorf("Packer.Add: %v allocations per sample", allocs)
	}
}

// packBenchSetup returns a writer to a file, a Packer knowing the test's
// events, and sample bodies of them (one by one, as a recorder makes them).
func packBenchSetup(tb testing.TB) (*Writer, *Packer, [][]byte) {
	path := writePackTest(tb, packTestSamples(4000), false, false, 1<<30)
	rd, err := Open(path, &Options{Order: FileOrder})
	if err != nil {
		tb.Fatal(err)
	}
	defer rd.Close()
	pk := NewPacker(packTestPackedID, packTestPackedType)
	var bodies [][]byte
	for rd.Next() {
		s, ok := rd.Record().(*Sample)
		if !ok || s.Event.Attr.Type != TypeTracepoint {
			continue
		}
		if pk.fit(append(leBytes(s.ID, s.Pid, s.Tid, s.Time, uint32(len(s.Raw))), s.Raw...)) == nil && !pk.AddEvent(s.ID, &s.Event.Attr, s.Event.Format) {
			tb.Fatalf("%s cannot be packed", s.Event.Name)
		}
		n := len(s.Raw)
		body := leBytes(s.ID, s.Pid, s.Tid, s.Time, uint32(n))
		bodies = append(bodies, append(body, s.Raw...))
	}
	f, _ := perftest.Create(tb, "bench.data")
	w, err := NewWriter(f, []WriterEvent{{Name: "x", IDs: []uint64{1}, Attr: Attr{Type: TypeSoftware, SampleType: packedType}}}, &WriterOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return w, pk, bodies
}

// BenchmarkPackerAdd: what packing costs a sample, against writing it
// one by one (uncompressed, to a file).
func BenchmarkPackerAdd(b *testing.B) {
	for _, packed := range []bool{true, false} {
		b.Run("packed="+strconv.FormatBool(packed), func(b *testing.B) {
			w, pk, bodies := packBenchSetup(b)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				body := bodies[i%len(bodies)]
				var err error
				if packed {
					err = pk.Add(w, MiscUser, body)
				} else {
					err = w.WriteRecordParts(uint32(RecordSample), MiscUser, body)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPackerAddFields: what packing a sample from its values costs
// (AddFields, as the in-process recorder packs its calls; uncompressed,
// to a file), the test's samples from one thread or alternating between
// two.
func BenchmarkPackerAddFields(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run("threads="+strconv.Itoa(threads), func(b *testing.B) {
			w, pk, bodies := packBenchSetup(b)
			samples := packTestSamples(4000)
			for _, s := range samples {
				if s.ev == 3 {
					continue
				}
				if pk.Fields(1<<56+uint64(s.ev)) < 0 {
					b.Fatalf("event %d not added", s.ev)
				}
			}
			_ = bodies
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s := &samples[i%len(samples)]
				if s.ev == 3 {
					continue
				}
				tid := uint32(100)
				if threads == 2 {
					tid = s.tid
				}
				if err := pk.AddFields(w, MiscUser, 1<<56+uint64(s.ev), 4242, tid, s.t, s.fields); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadPacked: reading packed samples against reading the same
// samples one by one, per sample.
func BenchmarkReadPacked(b *testing.B) {
	samples := packTestSamples(20000)
	for _, packed := range []bool{true, false} {
		b.Run("packed="+strconv.FormatBool(packed), func(b *testing.B) {
			path := writePackTest(b, samples, packed, false, 3000)
			b.ReportAllocs()
			for b.Loop() {
				rd, err := Open(path, nil)
				if err != nil {
					b.Fatal(err)
				}
				for rd.Next() {
				}
				rd.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(samples)), "ns/sample")
		})
	}
}

// TestPackerForgetsEndedThreads: a program that starts and ends threads
// all the time (each with a sample or two) leaves the Packer holding the
// batches of the last flush's threads, not of every thread it ever saw.
func TestPackerForgetsEndedThreads(t *testing.T) {
	w, pk, bodies := packBenchSetup(t)
	le := binary.LittleEndian
	body := make([]byte, 0, 256)
	for tid := uint32(1000); tid < 21000; tid++ {
		for _, b := range bodies[:2] {
			body = append(body[:0], b...)
			le.PutUint32(body[12:], tid)
			le.PutUint32(body[packedHead+4:], tid)
			if err := pk.Add(w, MiscUser, body); err != nil {
				t.Fatal(err)
			}
		}
		if err := pk.Flush(w); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(pk.batches); n > 1 {
		t.Errorf("after 20000 threads of one flush each: %d batches kept, want at most 1", n)
	}
	if pk.Written() != 20000 {
		t.Errorf("%d packed samples written, want 20000 (one per thread)", pk.Written())
	}
}
