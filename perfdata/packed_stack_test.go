package perfdata

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/perfdata/schema"
)

// stackTestType is the stack samples' layout, as the in-process recorder
// writes its entries' stack instances (without their RAW part).
const stackTestType = SampleIdentifier | SampleTID | SampleTime | SampleRegsUser | SampleStackUser

const (
	stackTestID, stackTestDeltaID = 1<<56 + 1, 1<<56 + 2
	stackTestDeltaType            = 65290
	stackTestRegs                 = 1<<6 | 1<<7 | 1<<8 // BP, SP, IP
)

// stackTestSample is a stack sample: thread, time, stack pointer and the
// stack copied from it up to its thread's top.
type stackTestSample struct {
	tid   uint32
	t     uint64
	sp    uint64
	stack []byte
}

// stackTestSamples makes n samples of a recursion in threads threads,
// each with a 12 KiB stack: a sample copies from a random depth up to the
// top, its thread's memory changed in a few words between samples (some
// near the top), some copies cut short by a few bytes (their top is not
// the thread's, so nothing of them is left out) or of an odd length.
func stackTestSamples(n, threads int) []stackTestSample {
	rng := rand.New(rand.NewPCG(5, 6))
	const size = 12 << 10
	mem := make([][]byte, threads)
	for i := range mem {
		mem[i] = make([]byte, size)
		for k := range mem[i] {
			mem[i][k] = byte(rng.Uint32())
		}
	}
	var out []stackTestSample
	lastDepth := make([]int, threads)
	for i := range lastDepth {
		lastDepth[i] = -1
	}
	t := uint64(1_000_000)
	for i := 0; i < n; i++ {
		th := rng.IntN(threads)
		m := mem[th]
		for k := 0; k < 1+rng.IntN(6); k++ {
			m[rng.IntN(size)] = byte(rng.Uint32())
		}
		if rng.IntN(3) == 0 {
			binary.LittleEndian.PutUint64(m[size-24-8*rng.IntN(4):], rng.Uint64())
		}
		depth := 8 * rng.IntN(size/8)
		if prev := lastDepth[th]; prev >= 0 && rng.IntN(4) == 0 {
			// The same depth as the thread's previous sample: the
			// registers before the stack equal its too.
			depth = prev
		}
		lastDepth[th] = depth
		end := size
		if rng.IntN(8) == 0 {
			end -= 1 + rng.IntN(20)
		}
		top := uint64(0x7ffc_0000_0000 + th*0x100000)
		t += 100 + rng.Uint64N(1000)
		out = append(out, stackTestSample{uint32(200 + th), t, top - size + uint64(depth), bytes.Clone(m[depth:end])})
	}
	return out
}

// stackTestBody is a sample's body as the kernel lays it out, and where
// its stack copy is in it.
func stackTestBody(s stackTestSample, pid uint32) (body []byte, lo, hi int) {
	le := binary.LittleEndian
	body = leBytes(uint64(stackTestID), pid, s.tid, s.t, uint64(2), uint64(0x7ffc_1000), s.sp, uint64(0x401234))
	size := (len(s.stack) + 7) &^ 7
	body = le.AppendUint64(body, uint64(size))
	lo = len(body)
	body = append(body, s.stack...)
	hi = len(body)
	body = append(body, make([]byte, size-len(s.stack))...)
	return le.AppendUint64(body, uint64(len(s.stack))), lo, hi
}

// writeStackTest writes the samples one by one or through StackDeltas,
// with a FINISHED_ROUND every round samples.
func writeStackTest(t testing.TB, samples []stackTestSample, delta, compress bool, round int) string {
	t.Helper()
	f, path := perftest.Create(t, "s.data")
	flags := AttrSampleIDAll | AttrDisabled
	events := []WriterEvent{
		{Name: "cycles", IDs: []uint64{stackTestID}, Attr: Attr{Type: TypeSoftware, Config: 0, SamplePeriod: 1, SampleType: stackTestType,
			SampleRegsUser: stackTestRegs, SampleStackUser: 16 << 10, Flags: flags}},
		{Name: schema.System + ":" + schema.StackDeltaEvent, IDs: []uint64{stackTestDeltaID},
			Attr: Attr{Type: TypeTracepoint, Config: stackTestDeltaType, SamplePeriod: 1, SampleType: packedType, Flags: flags}},
	}
	td := BuildTracingData(4096, []byte(writerHeaderPage), []byte(writerHeaderEvent),
		[]TraceSystem{{Name: schema.System, Formats: [][]byte{StackDeltaFormat(stackTestDeltaType)}}})
	w, err := NewWriter(f, events, &WriterOptions{Compress: compress})
	if err != nil {
		t.Fatal(err)
	}
	sd := NewStackDeltas(stackTestDeltaID, stackTestDeltaType)
	for i, s := range samples {
		body, lo, hi := stackTestBody(s, 4242)
		top := s.sp + uint64(len(s.stack))
		switch {
		case delta && i%3 != 0:
			// Built in the StackDeltas' buffer, as the in-process
			// recorder builds its stack samples.
			err = sd.AddOwn(w, MiscUser, append(sd.Buffer(), body...), lo, hi, top)
		case delta:
			// Add keeps a copy: the body changed after it is not the
			// next sample's previous one.
			err = sd.Add(w, MiscUser, body, lo, hi, top)
			clear(body)
		default:
			err = w.WriteRecordParts(uint32(RecordSample), MiscUser, body)
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%round == round-1 {
			if err := w.WriteRecordParts(uint32(RecordFinishedRound), 0, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Finish(&WriterFeatures{TracingData: td}); err != nil {
		t.Fatal(err)
	}
	if delta && sd.Written() != uint64(len(samples)) {
		t.Fatalf("%d stack-delta samples written of %d", sd.Written(), len(samples))
	}
	return path
}

// readStackTest lists every record a reader delivers: for a sample its
// event, thread, time, registers, stack size and stack bytes.
func readStackTest(t *testing.T, path string, order Order) ([]string, *Reader) {
	t.Helper()
	rd, err := Open(path, &Options{Order: order})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	var out []string
	for rd.Next() {
		switch rec := rd.Record().(type) {
		case *Sample:
			out = append(out, fmt.Sprintf("%s %d/%d %d %d %x %d %x", rec.Event.Name, rec.Pid, rec.Tid, rec.Time, rec.RegsABI, rec.Regs, rec.StackSize, rec.Stack))
		default:
			out = append(out, rec.Common().Type.String())
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return out, rd
}

// TestStackDeltaRoundTrip: stack samples written through StackDeltas read
// back exactly as the same samples written one by one (thread, time,
// registers, stack size and every byte of the stack, in the same order),
// with threads enough that writer and reader forget their previous
// samples now and then, in a fraction of the bytes.
func TestStackDeltaRoundTrip(t *testing.T) {
	for _, threads := range []int{2, stackDeltaThreads + 6} {
		samples := stackTestSamples(1500, threads)
		for _, compress := range []bool{false, true} {
			for _, order := range []Order{TimeOrder, FileOrder} {
				t.Run(fmt.Sprintf("threads=%d/compress=%s/order=%d", threads, strconv.FormatBool(compress), order), func(t *testing.T) {
					plain, _ := readStackTest(t, writeStackTest(t, samples, false, compress, 400), order)
					delta, rd := readStackTest(t, writeStackTest(t, samples, true, compress, 400), order)
					if len(rd.Warnings()) > 0 {
						t.Errorf("warnings: %v", rd.Warnings())
					}
					if len(plain) != len(delta) {
						t.Fatalf("%d records one by one, %d as stack deltas", len(plain), len(delta))
					}
					for i := range plain {
						if plain[i] != delta[i] {
							t.Fatalf("record %d:\none by one %.300s\ndelta      %.300s", i, plain[i], delta[i])
						}
					}
					if st := rd.Stats(); st.Packed != uint64(len(samples)) || st.Unpacked != uint64(len(samples)) {
						t.Errorf("%d stack-delta samples read, %d expanded; want %d", st.Packed, st.Unpacked, len(samples))
					}
				})
			}
		}
	}
	// Two threads: a sample leaves out what it shares with its thread's
	// previous one, the shorter of the two stacks but for a few changed
	// words, unless either was cut short (1 in 8 each). Stacks of uniform
	// length share on average a third of the longest, two thirds of
	// their mean; with (7/8)² of the pairs, about half of the bytes.
	samples := stackTestSamples(1500, 2)
	one, d := fileSize(t, writeStackTest(t, samples, false, false, 400)), fileSize(t, writeStackTest(t, samples, true, false, 400))
	t.Logf("%d bytes one by one, %d as stack deltas (%d samples)", one, d, len(samples))
	if d*10 > one*6 {
		t.Errorf("stack-delta file %d bytes, not 40%% smaller than %d", d, one)
	}
}

// TestStackDeltaPerfReads: perf reads a file with stack-delta samples:
// report --stats counts them under faultline:stackdelta and script
// prints them.
func TestStackDeltaPerfReads(t *testing.T) {
	perf := perftest.LookPerf(t, "stack-delta samples")
	path := writeStackTest(t, stackTestSamples(200, 2), true, true, 50)
	stats, _ := perftest.RunPerf(t, perf, "", "report", "--stats", "-i", path)
	flat := bytes.Join(bytes.Fields([]byte(stats)), []byte(" "))
	if want := fmt.Sprintf("%s:%s stats: SAMPLE events: %d", schema.System, schema.StackDeltaEvent, 200); !bytes.Contains(flat, []byte(want)) {
		t.Errorf("perf report --stats does not say %q:\n%s", want, stats)
	}
	script, _ := perftest.RunPerf(t, perf, "", "script", "-F", "tid,time,event,trace", "-i", path)
	if n := bytes.Count([]byte(script), []byte("faultline:stackdelta:")); n != 200 || !bytes.Contains([]byte(script), []byte("copies=")) {
		t.Errorf("perf script printed %d stack-delta samples of 200:\n%s", n, firstLines(script, 5))
	}
}

// TestStackDeltaCorrupt: a stack-delta sample whose bytes are changed
// yields warnings, never a panic.
func TestStackDeltaCorrupt(t *testing.T) {
	readCorrupted(t, writeStackTest(t, stackTestSamples(20, 3), true, false, 1000), 7, 200)
}

// TestStackDeltaAllocsDoNotGrow: reading stack-delta samples allocates
// nothing per sample once each thread's previous sample has grown, and
// neither does writing them.
func TestStackDeltaAllocsDoNotGrow(t *testing.T) {
	small := writeStackTest(t, stackTestSamples(300, 2), true, false, 100)
	big := writeStackTest(t, stackTestSamples(3000, 2), true, false, 100)
	a, b := decodeAllocs(t, small, TimeOrder, false), decodeAllocs(t, big, TimeOrder, false)
	t.Logf("reading: %.0f allocations for 300 samples, %.0f for 3000", a, b)
	if b > 2*a+50 {
		t.Errorf("reading stack-delta samples: %.0f allocations for 300 samples, %.0f for 3000", a, b)
	}
	add := stackDeltaSetup(t)
	i := 0
	if allocs := testing.AllocsPerRun(2000, func() { add(i); i++ }); allocs > 0 {
		t.Errorf("StackDeltas.Add: %v allocations per sample", allocs)
	}
}

// stackDeltaSetup returns a function that adds the i-th of 400 stack
// samples of two threads to a StackDeltas writing to a file, after adding
// each once.
func stackDeltaSetup(tb testing.TB) func(i int) {
	f, _ := perftest.Create(tb, "bench.data")
	w, err := NewWriter(f, []WriterEvent{{Name: "x", IDs: []uint64{1}, Attr: Attr{Type: TypeSoftware, SampleType: packedType}}}, &WriterOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	sd := NewStackDeltas(stackTestDeltaID, stackTestDeltaType)
	type sb struct {
		body   []byte
		lo, hi int
		top    uint64
	}
	var bodies []sb
	for _, s := range stackTestSamples(400, 2) {
		body, lo, hi := stackTestBody(s, 4242)
		bodies = append(bodies, sb{body, lo, hi, s.sp + uint64(len(s.stack))})
	}
	add := func(i int) {
		s := bodies[i%len(bodies)]
		if err := sd.Add(w, MiscUser, s.body, s.lo, s.hi, s.top); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range bodies {
		add(i)
	}
	return add
}

// BenchmarkStackDeltasAdd: what writing a stack sample of about 6 KiB as
// a stack delta costs (uncompressed, to a file).
func BenchmarkStackDeltasAdd(b *testing.B) {
	add := stackDeltaSetup(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		add(i)
	}
}

// TestAppendHeadCopies: the runs of at least deltaMinRun bytes of whole
// words equal at the same offsets from the start, highest offset first.
func TestAppendHeadCopies(t *testing.T) {
	a := make([]byte, 200)
	b := make([]byte, 180)
	for i := range a {
		a[i] = byte(i)
	}
	copy(b, a)
	b[8] = 0xff  // word 1 differs: the run 0..8 is too short
	b[40] = 0xff // word 5 differs: run 16..40 is 24 bytes, too short
	b[48] = 0xff // word 6 too: the run 56..176 (the common whole words) is kept
	got := appendHeadCopies([]deltaCopy{{at: 190, from: 170, n: 8}}, a, b)
	want := []deltaCopy{{at: 190, from: 170, n: 8}, {at: 56, from: 56, n: 120}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("copies %v, want %v", got, want)
	}
	b[16], b[100] = 0xff, 0xff // runs 24..40 (16), 56..96 (40) and 104..176 (72)
	got = appendHeadCopies(nil, a, b)
	want = []deltaCopy{{at: 104, from: 104, n: 72}, {at: 56, from: 56, n: 40}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("copies %v, want %v", got, want)
	}
}
