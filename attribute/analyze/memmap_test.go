package analyze

import (
	"fmt"
	"testing"

	"github.com/faultline/faultline/perfdata"
)

// TestKernelMap: an anonymous mapping only the kernel's record shows is
// remembered without the parts known mappings cover (the kernel reports
// a new mapping merged with its neighbours, and a part mprotect changed),
// and not at all while a recorded memory-map call on the thread is in
// flight (its exit makes the mapping), nor before the process's first
// fault (the exec's own mappings), nor in a recording without memory-map
// call events.
func TestKernelMap(t *testing.T) {
	const pid, tid, page = 7, 8, 4096
	rec := func(start, pages uint64, tid uint32) *perfdata.Mmap {
		return &perfdata.Mmap{Pid: pid, Tid: tid, Addr: start, Len: pages * page, Filename: "//anon"}
	}
	maps := func(ru *run) string {
		s := ""
		for _, m := range ru.mm.maps[pid] {
			s += fmt.Sprintf("[%#x %#x kernel=%v]", m.start, m.end, m.site.kernel)
		}
		return s
	}
	ru := &run{mm: newMemMaps()}
	ru.kernelMap(rec(0x10000, 4, tid))
	if got := maps(ru); got != "" {
		t.Errorf("without memory-map call events: %s, want none", got)
	}
	ru.mm.sysEvents = true
	ru.kernelMap(rec(0x10000, 4, tid))
	if got := maps(ru); got != "" {
		t.Errorf("before the process's first fault (the exec's own mappings): %s, want none", got)
	}
	ru.mm.ran[pid] = true
	// A call's mapping at 0x12000-0x14000, then the kernel's record of
	// 0x10000-0x18000 (merged with it): the two parts around it.
	ru.mm.insert(pid, &mapping{start: 0x12000, end: 0x14000, site: &mapSite{}})
	ru.kernelMap(rec(0x10000, 8, tid))
	want := "[0x10000 0x12000 kernel=true][0x12000 0x14000 kernel=false][0x14000 0x18000 kernel=true]"
	if got := maps(ru); got != want {
		t.Errorf("merged record: %s, want %s", got, want)
	}
	// mprotect of a part of what is known: nothing new.
	ru.kernelMap(rec(0x11000, 4, tid))
	if got := maps(ru); got != want {
		t.Errorf("a part of known mappings: %s, want %s", got, want)
	}
	// A recorded mmap in flight on the thread (its sys_enter seen): its
	// exit makes the mapping; another thread's record is taken.
	ru.mm.pending[tid] = &pendingCall{call: sysMmap}
	ru.kernelMap(rec(0x20000, 2, tid))
	ru.kernelMap(rec(0x30000, 1, tid+1))
	want += "[0x30000 0x31000 kernel=true]"
	if got := maps(ru); got != want {
		t.Errorf("with a call in flight: %s, want %s", got, want)
	}
}
