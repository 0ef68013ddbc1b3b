package analyze

import (
	"os"
	"testing"

	"github.com/faultline/faultline/perfdata"
)

// testdata/crafted/sametime.data: 16 Mi faults all at 1 ms, then a LOST
// record at 1 ms. Faults at one time must be one run in the tracker, not
// a time each (8 bytes a fault: 128 MiB here, growing without end). The
// loss opens the window [1 ms, 1 ms] (the last sample before it
// is at 1 ms), which holds every fault.
func TestLostTrackerSameTime(t *testing.T) {
	const path = "../../testdata/crafted/sametime.data"
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("crafted input missing (regenerate with testdata/crafted/gen.sh): %v", err)
	}
	// It expands ~10800×: the reader's inflate-ratio guard is off here.
	r, err := perfdata.Open(path, &perfdata.Options{MaxInflateRatio: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var l lostTracker
	maxRuns := 0
	for r.Next() {
		switch rec := r.Record().(type) {
		case *perfdata.Sample:
			l.sample(0, &rec.SampleID)
			l.fault(rec.Time)
			maxRuns = max(maxRuns, cap(l.recent))
		case *perfdata.Lost:
			l.lost(&rec.SampleID, rec.Count, false, -1)
		}
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	if l.Windows != 1 || l.Faults != 16<<20 {
		t.Errorf("%d windows, %d faults in them; want 1 and %d", l.Windows, l.Faults, 16<<20)
	}
	if maxRuns > 1 {
		t.Errorf("the tracker held room for %d runs of faults at one time", maxRuns)
	}
}

// Distinct times: a million faults 1 µs apart stay within lostMaxRuns
// runs, and a window opening at the midpoint counts the faults after it
// exactly, or overcounts by at most the one merged run that straddles it.
func TestLostTrackerManyTimes(t *testing.T) {
	var l lostTracker
	const n = 1 << 20
	const step = 1000 // ns: all n faults fall within 1.05 s... of which the last 1 s stays
	sid := perfdata.SampleID{Has: perfdata.SampleTime}
	peak := 0
	for i := range uint64(n) {
		sid.Time = 1e9 + i*step
		l.sample(0, &sid)
		l.fault(sid.Time)
		peak = max(peak, cap(l.recent))
	}
	if peak > 2*(lostMaxRuns+1024) {
		t.Errorf("capacity for %d runs, bound %d", peak, lostMaxRuns)
	}
	// Runs are now under l.res ns wide: a window counts its faults, plus
	// at most those of the run that straddles its start.
	slack := l.res/step + 1
	// A LOST_SAMPLES of the fault event at the last fault's time: S is the
	// event's last sample (the last fault), so the window holds 1 fault.
	last := sid.Time
	l.lost(&perfdata.SampleID{Time: last, Has: perfdata.SampleTime}, 1, true, 0)
	if l.Faults < 1 || l.Faults > slack {
		t.Errorf("window at the last fault counted %d faults, want 1 (at most %d with runs %d ns wide)", l.Faults, slack, l.res)
	}
	// A buffer loss with S 0.5 s before the last fault: the faults from S
	// on, 500001 of them (one every µs).
	var m lostTracker
	for i := range uint64(n) {
		m.fault(1e9 + i*step)
	}
	S := last - 5e8
	m.haveFirst = true
	m.mark(0, 0, S)
	m.lost(&perfdata.SampleID{Time: last, Has: perfdata.SampleTime}, 1, false, -1)
	exact := uint64(5e8/step + 1)
	if slack = m.res/step + 1; m.Faults < exact || m.Faults > exact+slack {
		t.Errorf("window of 0.5 s counted %d faults, want %d (up to %d more with runs %d ns wide)", m.Faults, exact, slack, m.res)
	}
	t.Logf("exact %d: counted %d; runs %d ns wide, %d kept", exact, m.Faults, m.res, len(m.recent)-m.head)
}
