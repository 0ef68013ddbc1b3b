package analyze

import (
	"bytes"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
)

const ms = 1e6

// lostSeq drives a run's lost-window tracking with a synthetic, time-ordered
// event sequence: events are 0 malloc entry, 1 malloc return, 2 free, 3 page
// fault.
type lostSeq struct {
	ru  *run
	evs []*perfdata.Event
}

func newLostSeq() *lostSeq {
	q := &lostSeq{ru: &run{}}
	for i, role := range []Role{RoleAllocEntry, RoleAllocReturn, RoleFree, RoleFault} {
		q.evs = append(q.evs, &perfdata.Event{Index: i})
		q.ru.infos = append(q.ru.infos, &eventInfo{role: role})
	}
	return q
}

func id(t uint64, cpu int) perfdata.SampleID {
	s := perfdata.SampleID{Time: t, Has: perfdata.SampleTime}
	if cpu >= 0 {
		s.CPU, s.Has = uint32(cpu), s.Has|perfdata.SampleCPU
	}
	return s
}

func (q *lostSeq) sample(ev int, t uint64, cpu int) {
	sid := id(t, cpu)
	q.ru.lost.sample(ev, &sid)
	if q.ru.infos[ev].role == RoleFault {
		q.ru.lost.fault(t)
	}
}

func (q *lostSeq) lostSamples(ev int, t uint64, cpu int, n uint64) {
	sid := id(t, cpu)
	q.ru.lostRecord(&sid, q.evs[ev], n, true)
}

func (q *lostSeq) lostBuffer(t uint64, cpu int, n uint64) {
	sid := id(t, cpu)
	q.ru.lostRecord(&sid, q.evs[0], n, false)
}

func TestLostWindows(t *testing.T) {
	t.Run("buffer loss without CPUs", func(t *testing.T) {
		q := newLostSeq()
		// The buffer is shared: the last record of any event before the
		// loss (the fault at 290) is where the loss may have begun.
		q.sample(0, 100*ms, -1) // entry
		q.sample(3, 150*ms, -1) // fault before the window: unaffected
		q.sample(1, 200*ms, -1) // return
		q.sample(3, 250*ms, -1) // before the window
		q.sample(3, 290*ms, -1) // the window's start
		q.lostBuffer(300*ms, -1, 5)
		q.sample(3, 305*ms, -1) // in the 10 ms grace
		q.sample(3, 310*ms, -1) // the grace's last instant
		q.sample(3, 311*ms, -1) // after
		got := q.ru.lost.LostWindows
		want := LostWindows{Windows: 1, Span: 10 * ms, Faults: 3}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("lost samples per event and CPU", func(t *testing.T) {
		q := newLostSeq()
		q.sample(1, 100*ms, 0) // return on CPU 0
		q.sample(1, 180*ms, 1) // return on CPU 1: another stream
		q.sample(3, 120*ms, 0) // faults
		q.sample(3, 190*ms, 1)
		q.sample(0, 195*ms, 0) // an entry on CPU 0 does not end the return's stream
		q.lostSamples(1, 200*ms, 0, 3)
		got := q.ru.lost.LostWindows
		// Window [100, 200] on CPU 0: both faults (the CPU of a fault does
		// not matter: the allocation it touches may come from any CPU).
		if want := (LostWindows{Windows: 1, Span: 100 * ms, Faults: 2}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("lost fault samples open no window", func(t *testing.T) {
		q := newLostSeq()
		q.sample(3, 100*ms, 0)
		q.lostSamples(3, 200*ms, 0, 10)
		q.sample(3, 201*ms, 0)
		if got := q.ru.lost.LostWindows; got != (LostWindows{}) {
			t.Errorf("got %+v, want nothing", got)
		}
	})
	t.Run("window at most a second", func(t *testing.T) {
		q := newLostSeq()
		q.sample(3, 1*ms, 0)    // first sample of the recording
		q.sample(3, 2500*ms, 0) // more than a second before the loss
		q.sample(3, 4500*ms, 0) // within it
		q.lostSamples(2, 5000*ms, 0, 1)
		if got, want := q.ru.lost.LostWindows, (LostWindows{Windows: 1, Span: 1000 * ms, Faults: 1}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("no time: unplaced", func(t *testing.T) {
		q := newLostSeq()
		q.sample(0, 100*ms, 0)
		q.ru.lostRecord(&perfdata.SampleID{}, q.evs[0], 7, true)
		if got, want := q.ru.lost.LostWindows, (LostWindows{Unplaced: 7}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("summary line", func(t *testing.T) {
		s := &Summary{LostWindows: LostWindows{Windows: 2, Span: 3 * ms, Faults: 25}}
		s.Tracker.Faults = 100
		var b bytes.Buffer
		s.WriteText(&b)
		if want := "25 faults (25.0%) fell in windows where allocation events were lost"; !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	})
}
