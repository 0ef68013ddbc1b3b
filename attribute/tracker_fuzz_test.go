package attribute

import (
	"encoding/binary"
	"testing"
)

// countSink checks the Sink contract while counting: an allocation is
// reported once, a fault's allocation is one the sink was told about (or
// an inherited copy), and nothing arrives after Close.
type countSink struct {
	t                *testing.T
	allocs, faults   uint64
	attributed, none uint64
	closed           bool
}

func (s *countSink) Allocation(a *Allocation) {
	if s.closed {
		s.t.Fatal("Allocation after Close")
	}
	if a.Inherited {
		s.t.Fatal("inherited allocation reported as new")
	}
	s.allocs++
}

func (s *countSink) Fault(f *Fault, a *Allocation) {
	if s.closed {
		s.t.Fatal("Fault after Close")
	}
	s.faults++
	if a == nil {
		s.none++
		return
	}
	s.attributed++
	if !a.decided && !a.Inherited {
		s.t.Fatalf("fault handed over with undecided allocation %+v", *a)
	}
}

// FuzzTracker feeds arbitrary event sequences (decoded from the input, 12
// bytes an event) to the tracker in both attribution modes, with and
// without a MaxLive cap. Property: no panic; the live count is kept and
// never exceeds the cap; after Close every fault was reported exactly once, attributed and
// unattributed add up, every allocation was reported once, and nothing is
// live.
func FuzzTracker(f *testing.F) {
	ev := func(op, pid, tid byte, v uint64) []byte {
		b := []byte{op, pid, tid, 0}
		return binary.LittleEndian.AppendUint64(b, v)
	}
	var seq []byte
	seq = append(seq, ev(0, 1, 1, 100)...)      // malloc entry
	seq = append(seq, ev(2, 1, 1, 0x601010)...) // fault inside, in flight
	seq = append(seq, ev(1, 1, 1, 0x601010)...) // return
	seq = append(seq, ev(2, 1, 1, 0x601020)...) // fault
	seq = append(seq, ev(5, 1, 2, 0)...)        // fork 1 → 2
	seq = append(seq, ev(2, 2, 2, 0x601030)...) // child COW fault
	seq = append(seq, ev(3, 1, 1, 0x601010)...) // free
	seq = append(seq, ev(4, 1, 1, 0x7f0000000000)...)
	seq = append(seq, ev(6, 2, 2, 0)...) // exec
	seq = append(seq, ev(7, 1, 1, 0)...) // exit
	f.Add(seq, false)
	f.Add(seq, true)
	f.Add(append(ev(0x10, 1, 1, 1<<40), ev(1, 1, 1, 0xfffffffffffffff8)...), false)

	f.Fuzz(func(t *testing.T, data []byte, window bool) {
		cfg := DefaultConfig()
		cfg.WindowMode = window
		cfg.AnonMmapEvents = len(data)%2 == 0
		cfg.MaxLive = len(data) % 5 // 0 (no cap) or a tiny cap
		sink := &countSink{t: t}
		tr := NewTracker(cfg, sink, fakeRegions{})
		var now uint64
		for len(data) >= 12 {
			op, pid, tid := data[0], uint32(data[1]%4), uint32(data[2]%8)
			// Threads belong to their process most of the time; the rest
			// exercises tid reuse.
			if data[3]&0x80 == 0 {
				tid = pid*8 + tid%2
			}
			v := binary.LittleEndian.Uint64(data[4:])
			data = data[12:]
			now += uint64(data4(v))
			kind := AllocKind(op>>4) % numKinds
			switch op & 0xf {
			case 0:
				tr.Entry(&Entry{Pid: pid, Tid: tid, Time: now, Kind: kind, Size: v >> 8, OldPtr: v & 0xff0, Stack: StackID(v & 7), CallerRet: v & 0x30})
			case 1:
				tr.Return(&Return{Pid: pid, Tid: tid, Time: now, Kind: kind, Ptr: v, RetIP: (v >> 4) & 0x30, Hdr: v >> 60, HasHdr: op&0x40 != 0})
			case 2:
				tr.Fault(&Fault{Pid: pid, Tid: tid, Time: now, Addr: v, Stack: StackID(v & 3), InMemset: op&0x20 != 0, Access: Access(op>>5) % 4})
			case 3:
				tr.Free(&Free{Pid: pid, Tid: tid, Time: now, Ptr: v})
			case 4:
				tr.Mmap(pid, now, v, v>>32, op&0x10 != 0)
			case 5:
				tr.Fork(pid, uint32(v%4))
			case 6:
				tr.Exec(pid)
			case 7:
				tr.Exit(pid, tid)
			default:
				now += v & 0xffffff // a gap in time
			}
			if n := tr.liveCount(); n != tr.nlive || (cfg.MaxLive > 0 && n > cfg.MaxLive) {
				t.Fatalf("live %d, counted %d, cap %d", n, tr.nlive, cfg.MaxLive)
			}
		}
		tr.Close()
		sink.closed = true
		st := tr.Stats()
		if sink.faults != st.Faults {
			t.Fatalf("sink saw %d faults, tracker counted %d", sink.faults, st.Faults)
		}
		if sink.attributed != st.Attributed {
			t.Fatalf("sink saw %d attributed faults, tracker counted %d", sink.attributed, st.Attributed)
		}
		if st.InFlight > st.Attributed || st.Approx > st.Attributed {
			t.Fatalf("in-flight %d / approx %d exceed attributed %d", st.InFlight, st.Approx, st.Attributed)
		}
		if sink.allocs != st.Allocations {
			t.Fatalf("sink saw %d allocations, tracker created %d", sink.allocs, st.Allocations)
		}
		if n := tr.liveCount(); n != 0 {
			t.Fatalf("%d allocations live after Close", n)
		}
	})
}

// data4 keeps time moving forward by small steps.
func data4(v uint64) uint32 { return uint32(v>>32) & 0xfff }

// TestMaxLive: at the cap new allocations are counted but not tracked, and
// their faults go unattributed; memory freed below the cap is tracked again.
func TestMaxLive(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxLive = 2
	sink := newRecSink()
	tr := NewTracker(cfg, sink, fakeRegions{})
	alloc := func(tm, ptr, size uint64, site StackID) {
		tr.Entry(&Entry{Pid: 1, Tid: 1, Time: tm, Size: size, Stack: site})
		tr.Return(&Return{Pid: 1, Tid: 1, Time: tm + 1, Ptr: ptr})
	}
	fault := func(tm, addr uint64) { tr.Fault(&Fault{Pid: 1, Tid: 1, Time: tm, Addr: addr}) }
	alloc(10, 0x601010, 4096, 1)
	alloc(20, 0x603010, 4096, 2)
	alloc(30, 0x605010, 4096, 3) // over the cap: untracked
	fault(40, 0x605100)          // on the untracked allocation: unattributed
	fault(41, 0x601100)          // on the first: attributed
	if n := tr.liveCount(); n != 2 {
		t.Errorf("live %d, want 2", n)
	}
	tr.Free(&Free{Pid: 1, Tid: 1, Time: 50, Ptr: 0x603010})
	alloc(60, 0x607010, 4096, 4) // room again
	fault(70, 0x607100)
	tr.Close()
	st := tr.Stats()
	if st.Untracked != 1 || st.Allocations != 4 || st.Attributed != 2 || st.Faults != 3 {
		t.Errorf("stats %+v: want 1 untracked of 4 allocations, 2 of 3 faults attributed", st)
	}
	if sink.bySite[3] != 0 || sink.bySite[1] != 1 || sink.bySite[4] != 1 {
		t.Errorf("faults by site %v", sink.bySite)
	}
	if len(sink.allocs) != 4 {
		t.Errorf("allocations reported %d, want 4 (untracked ones still count): %q", len(sink.allocs), sink.allocs)
	}
}

// TestMaxPending: a lost return must not make the thread hold every later
// fault: past maxPending the call is taken as unpaired and faults flow.
func TestMaxPending(t *testing.T) {
	sink := newRecSink()
	tr := NewTracker(DefaultConfig(), sink, fakeRegions{})
	tr.Entry(&Entry{Pid: 1, Tid: 1, Time: 1, Size: 64})
	for i := range maxPending + 10 {
		tr.Fault(&Fault{Pid: 1, Tid: 1, Time: uint64(2 + i), Addr: 0x7ff000001000})
	}
	st := tr.Stats()
	if st.PendingOverflows != 1 || st.UnpairedEntries != 1 {
		t.Errorf("stats %+v: want one overflow, one unpaired entry", st)
	}
	if got := sink.class["[stack]"]; got != maxPending+10 {
		t.Errorf("%d faults reported before Close, want %d", got, maxPending+10)
	}
}
