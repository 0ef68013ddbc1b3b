package perfdata

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// FuzzReader checks that any input gives an error, or records that format
// without panicking, in both orders and through the stream path.
// Seeds: the start of each fixture recording and synthetic files covering
// every sample field, pipe mode, big endian, zstd and packed samples.
func FuzzReader(f *testing.F) {
	for _, path := range perftest.Glob(f, "perf/*.data") {
		p, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		f.Add(p[:min(len(p), 8<<10)])
	}
	s := newSynth(false)
	s.addEvent(Attr{Type: TypeHardware, SampleType: allBits, ReadFormat: ReadGroup | ReadTotalTimeEnabled | ReadID | ReadLost,
		Flags: AttrSampleIDAll, BranchSampleType: branchHWIndex, SampleRegsUser: 0x7, SampleRegsIntr: 0x3, SampleStackUser: 64}, "cycles", 100)
	s.sample(0, fullSample(1))
	s.comm(0, 1, 1, "x", true, SampleID{})
	s.mmap2(0, 1, 0x1000, 0x1000, 0, "/bin/x", []byte{1, 2}, SampleID{})
	s.finishedRound()
	f.Add(s.file())
	f.Add(s.pipe())
	b := newSynth(true)
	b.addEvent(Attr{Type: TypeSoftware, Config: 2, SampleType: SampleIdentifier | SampleTime | SampleAddr | SampleTID, Flags: AttrSampleIDAll}, "page-faults:u", 1)
	sampleAt(b, 0, 5, 1)
	f.Add(b.file())
	z := newSynthDWARF(4)
	z.compress([]int{z.data.Len() / 2}, false)
	f.Add(z.file())
	z2 := newSynthDWARF(2)
	z2.compress(nil, true)
	f.Add(z2.file())
	// Packed samples (packed_test.go's events), stored plain.
	packed, err := os.ReadFile(writePackTest(f, packTestSamples(40), true, false, 20))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(packed)
	// Stack-delta samples (packed_stack_test.go's), stored plain.
	deltas, err := os.ReadFile(writeStackTest(f, stackTestSamples(6, 2), true, false, 3))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(deltas)

	f.Fuzz(func(t *testing.T, p []byte) {
		for _, order := range []Order{TimeOrder, FileOrder} {
			fuzzDecode(t, p, order, false)
		}
		fuzzDecode(t, p, FileOrder, true)
	})
}

func fuzzDecode(t *testing.T, p []byte, order Order, stream bool) {
	var r *Reader
	var err error
	if stream {
		r, err = NewStream(bytes.NewReader(p), &Options{Order: order})
	} else {
		r, err = New(bytes.NewReader(p), int64(len(p)), &Options{Order: order})
	}
	if err != nil {
		_ = err.Error()
		return
	}
	defer r.Close()
	n := 0
	for r.Next() {
		_ = fmtRecord(r.Record())
		if s, ok := r.Record().(*Sample); ok && s.Event != nil && s.Event.Format != nil {
			for i := range s.Event.Format.Fields {
				s.Event.Format.Fields[i].Uint64(s.Raw)
				s.Event.Format.Fields[i].Bytes(s.Raw)
			}
		}
		n++
	}
	if r.Err() != nil {
		_ = r.Err().Error()
	}
	for _, w := range r.Warnings() {
		_ = w.Error()
	}
	_ = fmt.Sprintf("%+v", *r.Meta())
	for _, ev := range r.Events() {
		_ = fmt.Sprintf("%+v", *ev)
	}
}

// FuzzPipeStream feeds input through the pipe (stream) path in time order
// with a small time-order queue and inflate limit, so that the bounds are
// in play on every input: any input gives an error or records, and the
// queue never holds more than its bound and one record.
func FuzzPipeStream(f *testing.F) {
	for _, name := range []string{"../testdata/perf/basic.pipe.data", craftedDir + "endless.data", craftedDir + "zbomb.data"} {
		p, err := os.ReadFile(name)
		if err != nil {
			f.Fatalf("seed %s missing: %v", name, err)
		}
		f.Add(p[:min(len(p), 16<<10)])
	}
	s := newSynth(false)
	s.addEvent(Attr{Type: TypeSoftware, Config: 2, SampleType: SampleIdentifier | SampleTime | SampleAddr | SampleTID, Flags: AttrSampleIDAll}, "page-faults:u", 1)
	for i := 9; i > 0; i-- {
		sampleAt(s, 0, uint64(i), 1)
	}
	f.Add(s.pipe())
	z := newSynthDWARF(4)
	z.compress([]int{z.data.Len() / 3, z.data.Len() / 2}, false)
	f.Add(z.pipe())

	const bound = 4 << 10
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := NewStream(bytes.NewReader(p), &Options{QueueSize: bound, MaxInflated: 1 << 20})
		if err != nil {
			_ = err.Error()
			return
		}
		defer r.Close()
		for r.Next() {
			_ = fmtRecord(r.Record())
		}
		if r.Err() != nil {
			_ = r.Err().Error()
		}
		for _, w := range r.Warnings() {
			_ = w.Error()
		}
		if peak := r.Stats().QueuePeak; peak > bound+1<<16+uint64(qentCost) {
			t.Fatalf("time-order queue held %d bytes, bound %d", peak, bound)
		}
		if r.q.queued != 0 {
			t.Fatalf("%d bytes still queued after the end", r.q.queued)
		}
	})
}
