package perfdata

import (
	"bytes"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// TestCorruptRecordKeepsQueued: a record whose length cannot be known stops
// decoding, but the records before it are still delivered in time order,
// even those queued in the same FINISHED_ROUND round (the fixtures have one
// or two rounds, so without the flush a corrupt record anywhere lost nearly
// everything). Found by fault injection (attribute/analyze/inject_test.go).
func TestCorruptRecordKeepsQueued(t *testing.T) {
	for _, name := range []string{"threads.plain.data", "threads.pipe.data"} {
		p := perftest.ReadTestdata(t, "perf", name)
		// The record header at about two thirds of the data.
		q, off := perftest.ZeroRecordSize(t, p, 2.0/3)
		count := func(order Order) (samples int, err error) {
			r, err := New(bytes.NewReader(q), int64(len(q)), &Options{Order: order})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for r.Next() {
				if _, ok := r.Record().(*Sample); ok {
					samples++
				}
			}
			return samples, r.Err()
		}
		inFile, errFile := count(FileOrder)
		inTime, errTime := count(TimeOrder)
		if errFile == nil || errTime == nil {
			t.Errorf("%s: size 0 at %#x: no error (file order %v, time order %v)", name, off, errFile, errTime)
		}
		if inFile == 0 || inTime != inFile {
			t.Errorf("%s: size 0 at %#x: %d samples in time order, %d in file order; want the same, not 0", name, off, inTime, inFile)
		}
	}
}
