package symbolize

import (
	"testing"

	"github.com/faultline/faultline/symbolize/unwind"
)

// TestStackNeed: a walk cut short at the end of its copy needed a copy from
// its SP to the top of its thread's stack — the root frame's SP of a
// complete walk of the thread when there was one, else the end of the
// [stack] mapping (an estimate) — and nothing can be told without either.
func TestStackNeed(t *testing.T) {
	s := bareSession(t)
	const stackEnd = 0x7ffd_0002_0000
	s.Maps.Add(1, &Mapping{Start: stackEnd - 0x21000, End: stackEnd, File: "[stack]"})
	walk := func(tid uint32, sp, endSP uint64, stop unwind.Stop) {
		s.noteDepth(&Walk{Pid: 1, Tid: tid, hasRegs: true, sp: sp, endSP: endSP, stop: stop})
	}
	// Thread 1: a complete walk whose root frame's SP is 0x7ffd_0001_f000.
	walk(1, 0x7ffd_0001_e000, 0x7ffd_0001_f000, unwind.StopRoot)
	walk(1, 0x7ffd_0001_7000, 0, unwind.StopStackEnd) // needs 0x8000 = 32768
	walk(1, 0x7ffd_0001_c800, 0, unwind.StopStackEnd) // needs 0x2800 = 10240
	// Thread 2 never completes: the mapping's end, 0x7ffd_0002_0000.
	walk(2, 0x7ffd_0001_0000, 0, unwind.StopStackEnd) // needs 0x10000 = 65536: beyond the kernel's copy
	// A stack grown below the recorded mapping still finds it above.
	walk(2, stackEnd-0x21000-0x100, 0, unwind.StopStackEnd) // needs 0x21100 = 135424
	// No mapping above: unknown.
	s.noteDepth(&Walk{Pid: 7, Tid: 7, hasRegs: true, sp: 0x1000, stop: unwind.StopStackEnd})
	walk(1, 0x7ffd_0001_0000, 0, unwind.StopNoCFI) // not cut short: not counted

	// Thread 1 on a signal or coroutine stack of its own (an anonymous
	// mapping below): its root's SP lies on another stack, so the need is
	// up to this mapping's end; and a copy that already reached that end
	// could not have gone further (AtTop, not counted).
	const alt = 0x7f00_0001_0000
	s.Maps.Add(1, &Mapping{Start: alt, End: alt + 0x4000, File: "//anon"})
	s.noteDepth(&Walk{Pid: 1, Tid: 1, hasRegs: true, sp: alt + 0x3000, stop: unwind.StopStackEnd, stack: make([]byte, 0x800)}) // needs 0x1000 = 4096
	s.noteDepth(&Walk{Pid: 1, Tid: 1, hasRegs: true, sp: alt + 0x3000, stop: unwind.StopStackEnd, stack: make([]byte, 0x1000)})

	n := s.Stats().Need
	if n.Walks != 6 || n.Estimated != 3 || n.Unknown != 1 || n.AtTop != 1 || n.Max != 0x21100 {
		t.Fatalf("need %+v: want 6 walks, 3 estimated, 1 unknown, 1 at the top, max 135424", n)
	}
	for _, c := range []struct {
		frac    float64
		size    uint64
		covered uint64
		ok      bool
	}{
		{0.2, 4096, 1, true},
		{0.4, 10240, 2, true}, // 10240 is a whole bucket
		{0.6, 32768, 3, true},
		{0.8, 65536, 4, true}, // 65536: the bucket (64512, 65536]
		{1, 0, 4, false},      // the deepest is beyond any copy
	} {
		size, covered, ok := n.Reaching(c.frac)
		if size != c.size || covered != c.covered || ok != c.ok {
			t.Errorf("Reaching(%v) = %d, %d, %v; want %d, %d, %v", c.frac, size, covered, ok, c.size, c.covered, c.ok)
		}
	}
	if w := n.Within(65528); w != 3 {
		t.Errorf("Within(65528) = %d, want 3 (the 65536-byte need is not)", w)
	}
}
