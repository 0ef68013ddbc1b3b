package attribute

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// recSink records what the tracker reports, as text, so the expected values
// in these tests are plain arithmetic over the events fed in.
type recSink struct {
	allocs []string
	faults []string
	bySite map[StackID]uint64
	class  map[string]uint64
}

func newRecSink() *recSink {
	return &recSink{bySite: map[StackID]uint64{}, class: map[string]uint64{}}
}

// Allocation keeps s.allocs sorted by site: the tracker reports an
// allocation when its flags are final, which for the untouched ones is the
// end of the stream, in address order.
func (s *recSink) Allocation(a *Allocation) {
	s.allocs = append(s.allocs, fmt.Sprintf("site=%d size=%d ptr=%#x flags=%s", a.Site, a.Size, a.Ptr, a.Flags))
	sort.Strings(s.allocs)
}

func (s *recSink) Fault(f *Fault, a *Allocation) {
	if a == nil {
		s.class[f.Class.String()]++
		s.faults = append(s.faults, fmt.Sprintf("addr=%#x class=%s", f.Addr, f.Class))
		return
	}
	s.bySite[a.Site]++
	var extra []string
	if f.InFlight {
		extra = append(extra, "inflight")
	}
	if f.InAllocator {
		extra = append(extra, "allocator")
	}
	if f.Approx {
		extra = append(extra, "approx")
	}
	s.faults = append(s.faults, fmt.Sprintf("addr=%#x site=%d flags=%s %s", f.Addr, a.Site, a.Flags, strings.Join(extra, ",")))
}

type fakeRegions struct{}

func (fakeRegions) Region(pid uint32, addr uint64) Class {
	switch {
	case addr >= 0x7ff000000000:
		return Class{Kind: ClassStack}
	case addr >= 0x500000 && addr < 0x10000000:
		return Class{Kind: ClassHeap}
	case addr < 0x500000:
		return Class{Kind: ClassFile, Name: "prog"}
	}
	return Class{Kind: ClassAnon}
}

const pid, tid = 100, 100

func alloc(t *Tracker, time uint64, kind AllocKind, size, ptr uint64, site StackID) {
	t.Entry(&Entry{Pid: pid, Tid: tid, Time: time, Kind: kind, Size: size, Stack: site, CallerRet: 0x401000 + uint64(site)})
	t.Return(&Return{Pid: pid, Tid: tid, Time: time + 1, Kind: kind, Ptr: ptr, RetIP: 0x401000 + uint64(site)})
}

func fault(t *Tracker, time, addr uint64, memset bool) {
	t.Fault(&Fault{Pid: pid, Tid: tid, Time: time, Addr: addr, InMemset: memset})
}

func TestTouchPages(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, fakeRegions{})
	// site 1: 4 pages touched once each; site 2: 2 pages; site 3: small.
	alloc(tr, 10, KindMalloc, 4*4096, 0x600010, 1)
	alloc(tr, 20, KindMalloc, 2*4096, 0x604020, 2)
	alloc(tr, 30, KindMalloc, 100, 0x606030, 3)
	for i := uint64(0); i < 4; i++ {
		fault(tr, 40+i, 0x600010+i*4096, false)
	}
	fault(tr, 50, 0x604020, false)
	fault(tr, 51, 0x605020, false)
	fault(tr, 52, 0x606030, false)
	fault(tr, 53, 0x7ff000001000, false) // stack
	fault(tr, 54, 0x401234, false)       // program text
	fault(tr, 55, 0x9000000, false)      // heap, nothing live
	tr.Close()
	if got := s.bySite; got[1] != 4 || got[2] != 2 || got[3] != 1 {
		t.Errorf("faults by site = %v, want 1:4 2:2 3:1", got)
	}
	if s.class["[stack]"] != 1 || s.class["[file] prog"] != 1 || s.class["[heap]"] != 1 {
		t.Errorf("classes = %v", s.class)
	}
	want := []string{
		"site=1 size=16384 ptr=0x600010 flags=-",
		"site=2 size=8192 ptr=0x604020 flags=-",
		"site=3 size=100 ptr=0x606030 flags=fast",
	}
	if strings.Join(s.allocs, "\n") != strings.Join(want, "\n") {
		t.Errorf("allocs:\n%s\nwant:\n%s", strings.Join(s.allocs, "\n"), strings.Join(want, "\n"))
	}
	st := tr.Stats()
	if st.Faults != 10 || st.Attributed != 7 || st.Allocations != 3 {
		t.Errorf("stats = %+v", st)
	}
}

// Adjacent small chunks: the second chunk's prev_size word is the first
// chunk's last 8 usable bytes, so intervals must start at ptr-8 or the
// second allocation would evict the first.
func TestAdjacentChunksStayLive(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	alloc(tr, 1, KindMalloc, 24, 0x600010, 1) // chunk 32 bytes: [0x600000, 0x600020)
	alloc(tr, 2, KindMalloc, 24, 0x600030, 2) // next chunk at 0x600020
	if tr.liveCount() != 2 {
		t.Fatalf("live = %d, want 2", tr.liveCount())
	}
	fault(tr, 3, 0x600010+20, false) // last usable bytes of the first
	fault(tr, 4, 0x600030, false)
	tr.Close()
	if s.bySite[1] != 1 || s.bySite[2] != 1 {
		t.Errorf("by site %v", s.bySite)
	}
	if tr.Stats().Evicted != 0 {
		t.Errorf("evicted %d", tr.Stats().Evicted)
	}
}

func TestReuseEvicts(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	alloc(tr, 1, KindMalloc, 8192, 0x600010, 1)
	alloc(tr, 2, KindMalloc, 100, 0x601010, 2) // inside the first: it was freed
	fault(tr, 3, 0x600010, false)              // first's range, but it is gone
	fault(tr, 4, 0x601020, false)
	tr.Close()
	if s.bySite[1] != 0 || s.bySite[2] != 1 || tr.Stats().Evicted != 1 {
		t.Errorf("by site %v, evicted %d", s.bySite, tr.Stats().Evicted)
	}
}

func TestMmapFlagSources(t *testing.T) {
	// From the header's IS_MMAPPED bit (1 MiB malloc gave hdr=0x101002).
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 1, Size: 1 << 20, Stack: 1})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 2, Ptr: 0x7f0000000010, Hdr: 0x101002, HasHdr: true})
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 3, Size: 4096, Stack: 2})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 4, Ptr: 0x600010, Hdr: 0x1011, HasHdr: true})
	tr.Close()
	if s.allocs[0] != "site=1 size=1048576 ptr=0x7f0000000010 flags=mmap" || s.allocs[1] != "site=2 size=4096 ptr=0x600010 flags=-" {
		t.Errorf("header: %q", s.allocs)
	}

	// From an anonymous mmap at ptr-16 between entry and return; an older
	// mmap at the same start does not count.
	s = newRecSink()
	tr = NewTracker(DefaultConfig(), s, nil)
	tr.Mmap(pid, 1, 0x7f0000100000, 1<<20+4096, true)
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 2, Size: 1 << 20, Stack: 1})
	tr.Mmap(pid, 3, 0x7f0000000000, 1<<20+4096, true)
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 4, Ptr: 0x7f0000000010})
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 5, Size: 1 << 20, Stack: 2})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 6, Ptr: 0x7f0000100010})
	tr.Close()
	if s.allocs[0] != "site=1 size=1048576 ptr=0x7f0000000010 flags=mmap" || s.allocs[1] != "site=2 size=1048576 ptr=0x7f0000100010 flags=-" {
		t.Errorf("event: %q", s.allocs)
	}

	// By size, only when the recording has no anonymous mmap events.
	s = newRecSink()
	cfg := DefaultConfig()
	cfg.AnonMmapEvents = false
	tr = NewTracker(cfg, s, nil)
	alloc(tr, 1, KindMalloc, 128<<10, 0x7f0000000010, 1)
	alloc(tr, 2, KindMalloc, 128<<10-1, 0x600010, 2)
	tr.Close()
	if s.allocs[0] != "site=1 size=131072 ptr=0x7f0000000010 flags=mmap" || s.allocs[1] != "site=2 size=131071 ptr=0x600010 flags=-" || tr.Stats().MmapBySize != 2 {
		t.Errorf("size: %q", s.allocs)
	}
}

// An allocator without glibc's header (jemalloc: record writes hdr 0;
// a perf probe recording may have no hdr field): a block is mmap'd when the call
// created the anonymous mapping holding it, wherever in it the block sits
// (jemalloc returns an 8 MiB block inside a larger mapping, not at its
// page + 16). A block in a mapping made before the call is not, nor a
// small block whose call mapped a whole slab (jemalloc's first 512 B
// call maps 2 MiB).
func TestMmapFlagOtherAllocators(t *testing.T) {
	for _, hdr := range []struct {
		name string
		has  bool
	}{{"hdr 0 (record: no header)", true}, {"no hdr field", false}} {
		s := newRecSink()
		tr := NewTracker(DefaultConfig(), s, nil)
		tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 1, Size: 8 << 20, Stack: 1})
		tr.Mmap(pid, 2, 0x7f0000000000, 12<<20, true)
		tr.Return(&Return{Pid: pid, Tid: tid, Time: 3, Ptr: 0x7f0000200000, HasHdr: hdr.has})
		tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 4, Size: 512, Stack: 2})
		tr.Return(&Return{Pid: pid, Tid: tid, Time: 5, Ptr: 0x7f0000001000, HasHdr: hdr.has})
		tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 6, Size: 512, Stack: 3})
		tr.Mmap(pid, 7, 0x7e0000000000, 2<<20, true)
		tr.Return(&Return{Pid: pid, Tid: tid, Time: 8, Ptr: 0x7e0000000000, HasHdr: hdr.has})
		// A 10 MiB mapping placed right below the 12 MiB one above is
		// reported merged with it (22 MiB): only its own 10 MiB count,
		// so the 8 MiB block in it is mmap.
		tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 9, Size: 8 << 20, Stack: 4})
		tr.Mmap(pid, 10, 0x7f0000000000-10<<20, 22<<20, true)
		tr.Return(&Return{Pid: pid, Tid: tid, Time: 11, Ptr: 0x7f0000000000 - 10<<20 + 0xe00, HasHdr: hdr.has})
		tr.Close()
		want := []string{"site=1 size=8388608 ptr=0x7f0000200000 flags=mmap", "site=2 size=512 ptr=0x7f0000001000 flags=-", "site=3 size=512 ptr=0x7e0000000000 flags=-", "site=4 size=8388608 ptr=0x7effff600e00 flags=mmap"}
		if fmt.Sprint(s.allocs) != fmt.Sprint(want) {
			t.Errorf("%s: %q, want %q", hdr.name, s.allocs, want)
		}
		if st := tr.Stats(); st.MmapByEvent != 4 || st.MmapByHeader != 0 {
			t.Errorf("%s: decided by event %d, by header %d; want 4, 0", hdr.name, st.MmapByEvent, st.MmapByHeader)
		}
	}
}

// glibc writes an mmap'd chunk's header inside malloc: that fault is taken
// before the return and must land on the new chunk without deciding the zero
// flag; the first fault after the return (memset's) decides it.
func TestInFlightFaultAndZero(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 1, Size: 3 * 4096, Stack: 1})
	tr.Mmap(pid, 2, 0x7f0000000000, 3*4096+4096, true)
	fault(tr, 3, 0x7f0000000000, false) // prev_size write at ptr-16
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 4, Ptr: 0x7f0000000010})
	fault(tr, 5, 0x7f0000001000, true) // memset
	fault(tr, 6, 0x7f0000002000, true)
	fault(tr, 7, 0x7f0000003000, false)
	tr.Close()
	want := "addr=0x7f0000000000 site=1 flags=mmap,zero inflight|addr=0x7f0000001000 site=1 flags=mmap,zero |addr=0x7f0000002000 site=1 flags=mmap,zero |addr=0x7f0000003000 site=1 flags=mmap,zero "
	if got := strings.Join(s.faults, "|"); got != want {
		t.Errorf("faults\n got %s\nwant %s", got, want)
	}
	if tr.Stats().InFlight != 1 {
		t.Errorf("inflight %d", tr.Stats().InFlight)
	}

	// Without memset first, no zero flag; calloc is zero regardless.
	s = newRecSink()
	tr = NewTracker(DefaultConfig(), s, nil)
	alloc(tr, 1, KindMalloc, 8192, 0x600010, 1)
	fault(tr, 2, 0x600010, false)
	fault(tr, 3, 0x601010, true)
	alloc(tr, 4, KindCalloc, 8192, 0x700010, 2)
	tr.Close()
	if s.allocs[0] != "site=1 size=8192 ptr=0x600010 flags=-" || s.allocs[1] != "site=2 size=8192 ptr=0x700010 flags=zero" {
		t.Errorf("allocs %q", s.allocs)
	}
}

func TestFreeAndRealloc(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, fakeRegions{})
	alloc(tr, 1, KindMalloc, 8192, 0x600010, 1)
	tr.Free(&Free{Pid: pid, Tid: tid, Time: 2, Ptr: 0x600010})
	fault(tr, 3, 0x600010, false) // freed: heap, no allocation
	alloc(tr, 4, KindMalloc, 4096, 0x700010, 2)
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 5, Kind: KindRealloc, Size: 16384, OldPtr: 0x700010, Stack: 3})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 6, Kind: KindRealloc, Ptr: 0x800010})
	fault(tr, 7, 0x700010, false) // old block: gone
	fault(tr, 8, 0x800010, false)
	tr.Close()
	if s.bySite[1] != 0 || s.bySite[2] != 0 || s.bySite[3] != 1 || s.class["[heap]"] != 2 {
		t.Errorf("by site %v classes %v", s.bySite, s.class)
	}
	if st := tr.Stats(); st.Frees != 1 || st.UnknownFrees != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A forked child writing to the parent's allocation takes copy-on-write
// faults that count against the parent's site, without a new allocation.
func TestForkCopiesAndExecClears(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, fakeRegions{})
	alloc(tr, 1, KindMalloc, 4*4096, 0x600010, 1)
	fault(tr, 2, 0x600010, false)
	tr.Fork(pid, 200)
	for i := uint64(0); i < 4; i++ {
		tr.Fault(&Fault{Pid: 200, Tid: 200, Time: 3 + i, Addr: 0x600010 + i*4096})
	}
	tr.Exec(200)
	tr.Fault(&Fault{Pid: 200, Tid: 200, Time: 9, Addr: 0x600010})
	tr.Close()
	if s.bySite[1] != 5 || len(s.allocs) != 1 || s.class["[heap]"] != 1 {
		t.Errorf("by site %v allocs %q classes %v", s.bySite, s.allocs, s.class)
	}
}

func TestThreadsShareAddressSpace(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	tr.Fork(pid, pid) // a thread: same process
	tr.Entry(&Entry{Pid: pid, Tid: 101, Time: 1, Size: 8192, Stack: 1})
	tr.Return(&Return{Pid: pid, Tid: 101, Time: 2, Ptr: 0x600010})
	tr.Fault(&Fault{Pid: pid, Tid: 102, Time: 3, Addr: 0x601000})
	tr.Close()
	if s.bySite[1] != 1 {
		t.Errorf("by site %v", s.bySite)
	}
}

func TestLostEventsBreakPairsSafely(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	// lost return: the next entry replaces the first
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 1, Size: 100, Stack: 1, CallerRet: 0x1111})
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 2, Size: 200, Stack: 2, CallerRet: 0x2222})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 3, Ptr: 0x600010, RetIP: 0x2222})
	// lost entry: a return with nothing in flight
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 4, Ptr: 0x700010})
	// lost return and lost entry: ret ip disagrees
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 5, Size: 300, Stack: 3, CallerRet: 0x3333})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 6, Ptr: 0x800010, RetIP: 0x4444})
	tr.Close()
	st := tr.Stats()
	if st.UnpairedEntries != 2 || st.UnpairedReturns != 2 || st.RetIPMismatches != 1 || st.Allocations != 1 {
		t.Errorf("stats %+v", st)
	}
	if len(s.allocs) != 1 || s.allocs[0] != "site=2 size=200 ptr=0x600010 flags=-" {
		t.Errorf("allocs %q", s.allocs)
	}
}

func TestNestedReallocMalloc(t *testing.T) {
	// realloc(NULL, n) calls malloc: the inner pair must not break the outer.
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 1, Kind: KindRealloc, Size: 8192, Stack: 1})
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 2, Kind: KindMalloc, Size: 8192, Stack: 2})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 3, Kind: KindMalloc, Ptr: 0x600010})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 4, Kind: KindRealloc, Ptr: 0x600010})
	fault(tr, 5, 0x600100, false)
	tr.Close()
	st := tr.Stats()
	if st.UnpairedEntries != 0 || st.UnpairedReturns != 0 || s.bySite[1] != 1 || st.Evicted != 1 {
		t.Errorf("stats %+v by site %v", st, s.bySite)
	}
}

func TestWindowMode(t *testing.T) {
	s := newRecSink()
	cfg := DefaultConfig()
	cfg.WindowMode = true
	tr := NewTracker(cfg, s, fakeRegions{})
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 1e6, Size: 1 << 20, Stack: 1})
	fault(tr, 2e6, 0x7f0000000000, true)
	fault(tr, 10e6, 0x7f0000001000, false)
	fault(tr, 12e6, 0x7f0000002000, false) // 11 ms after: outside the window
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 20e6, Size: 64, Stack: 2})
	fault(tr, 21e6, 0x600000, false)
	tr.Close()
	if s.bySite[1] != 2 || s.bySite[2] != 1 || s.class["[anon]"] != 1 {
		t.Errorf("by site %v classes %v", s.bySite, s.class)
	}
	if s.allocs[0] != "site=1 size=1048576 ptr=0x0 flags=mmap,zero" || s.allocs[1] != "site=2 size=64 ptr=0x0 flags=fast" {
		t.Errorf("allocs %q", s.allocs)
	}
	if tr.Stats().Approx != 3 {
		t.Errorf("approx %d", tr.Stats().Approx)
	}
}

type nopSink struct{ n int }

func (s *nopSink) Allocation(*Allocation)    { s.n++ }
func (s *nopSink) Fault(*Fault, *Allocation) { s.n++ }

// The per-event path allocates nothing once the live set and the recycled
// allocations have grown to the workload's size.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	tr := NewTracker(DefaultConfig(), &nopSink{}, nil)
	var e Entry
	var r Return
	var f Fault
	var fr Free
	round := func(base uint64) {
		for i := uint64(0); i < 64; i++ {
			ptr := base + i*8192 + 16
			e = Entry{Pid: pid, Tid: tid, Time: i, Size: 8000, Stack: StackID(i % 7)}
			tr.Entry(&e)
			r = Return{Pid: pid, Tid: tid, Time: i, Ptr: ptr}
			tr.Return(&r)
			f = Fault{Pid: pid, Tid: tid, Time: i, Addr: ptr + 100}
			tr.Fault(&f)
		}
		for i := uint64(0); i < 64; i += 2 {
			fr = Free{Pid: pid, Tid: tid, Ptr: base + i*8192 + 16}
			tr.Free(&fr)
		}
	}
	round(0x1000000)
	round(0x2000000)
	n := testing.AllocsPerRun(20, func() { round(0x1000000) })
	if n != 0 {
		t.Errorf("allocations per round of 64 allocs/faults = %v, want 0", n)
	}
}

func BenchmarkTracker(b *testing.B) {
	tr := NewTracker(DefaultConfig(), &nopSink{}, nil)
	var e Entry
	var r Return
	var f Fault
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		// 100k live allocations; each reuse of an address evicts the last.
		k := uint64(i % 100000)
		ptr := 0x10000000 + k*4096 + 16
		e = Entry{Pid: pid, Tid: tid, Time: uint64(i), Size: 4000, Stack: StackID(k % 50)}
		tr.Entry(&e)
		r = Return{Pid: pid, Tid: tid, Time: uint64(i), Ptr: ptr}
		tr.Return(&r)
		f = Fault{Pid: pid, Tid: tid, Time: uint64(i), Addr: ptr + 64}
		tr.Fault(&f)
	}
}

// realloc(NULL, n) jumps into malloc: the malloc entry sees the realloc
// uretprobe's trampoline as its return address (the caller passes 0), and
// one return fires both return probes, malloc's first, with the same
// pointer and return address. One allocation, no lost-event signals.
func TestChainedReallocNull(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 1, Kind: KindRealloc, Size: 8192, Stack: 1, CallerRet: 0x401234})
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 2, Kind: KindMalloc, Size: 8192, Stack: 2})
	fault(tr, 3, 0x600010-8, false) // header write, in flight
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 4, Kind: KindMalloc, Ptr: 0x600010, RetIP: 0x401234})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 4, Kind: KindRealloc, Ptr: 0x600010, RetIP: 0x401234})
	fault(tr, 5, 0x601000, false)
	tr.Close()
	st := tr.Stats()
	if st.Allocations != 1 || st.ChainedReturns != 1 || st.UnpairedEntries+st.UnpairedReturns+st.RetIPMismatches != 0 || st.Evicted != 0 {
		t.Errorf("stats %+v", st)
	}
	if s.bySite[2] != 2 || len(s.allocs) != 1 {
		t.Errorf("by site %v allocs %q", s.bySite, s.allocs)
	}
}

// A loop that mallocs, frees (unprobed) and mallocs again at the same call
// site gets the same pointer and return address twice: two allocations,
// not a chained return.
func TestSamePtrSameSiteIsNotChained(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	alloc(tr, 1, KindMalloc, 64, 0x600010, 1)
	alloc(tr, 3, KindMalloc, 64, 0x600010, 1)
	tr.Close()
	if st := tr.Stats(); st.Allocations != 2 || st.ChainedReturns != 0 || len(s.allocs) != 2 {
		t.Errorf("stats %+v allocs %q", st, s.allocs)
	}
}

// Faults malloc takes while serving a call: the new top's size word right
// after the chunk (splitting the top) and the heap it sets up go to the
// call's allocation; a fault on file-backed memory (libc's main_arena) or
// the stack does not. Chunk size without a header: request2size(64) = 80,
// so the top header at ptr+72 is inside [ptr-16, ptr+80); with hdr=0x61
// (chunk 96) ptr+88 is inside too.
func TestInFlightHeapGrowth(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, fakeRegions{})
	const ptr = 0x600ff0 // chunk 0x600fe0, 80 bytes: the top header lands on the next page
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 1, Size: 64, Stack: 1})
	fault(tr, 2, 0x600008, false)       // sysmalloc's top header at the heap start: heap, not the chunk
	fault(tr, 3, ptr+72, false)         // set_head(remainder) at ptr+chunksize-8
	fault(tr, 4, 0x400100, false)       // main_arena in libc's .data: a file
	fault(tr, 5, 0x7ff000001000, false) // the stack
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 6, Ptr: ptr})
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 7, Size: 80, Stack: 2})
	fault(tr, 8, 0x602000+88, false) // inside a 96-byte chunk by its header
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 9, Ptr: 0x602000, Hdr: 0x61, HasHdr: true})
	tr.Close()
	// The unattributed ones come first: the allocation's own wait until its
	// flags are final (here: the end, nothing touches it after return).
	want := "addr=0x400100 class=[file] prog|addr=0x7ff000001000 class=[stack]|addr=0x600008 site=1 flags=fast inflight,allocator|addr=0x601038 site=1 flags=fast inflight|addr=0x602058 site=2 flags=fast inflight"
	if got := strings.Join(s.faults, "|"); got != want {
		t.Errorf("faults\n got %s\nwant %s", got, want)
	}
	if st := tr.Stats(); st.InFlight != 3 || st.InAllocator != 1 || st.Attributed != 3 {
		t.Errorf("in flight %d, on the allocator's memory %d, attributed %d; want 3, 1, 3", st.InFlight, st.InAllocator, st.Attributed)
	}
}

func TestChunkSize(t *testing.T) {
	for _, c := range []struct {
		size, hdr uint64
		has       bool
		want      uint64
	}{
		{0, 0, false, 32}, {24, 0, false, 32}, {25, 0, false, 48}, {64, 0, false, 80},
		{24576, 0, false, 24592},
		{24, 0x21, true, 32},                // a header: its size
		{1 << 20, 0x101002, true, 0x101000}, // mmap'd: the page-rounded mapping
		{4096, 0x21, true, 4112},            // a header too small for the request: not this chunk's
	} {
		if got := chunkSize(c.size, c.hdr, c.has); got != c.want {
			t.Errorf("ChunkSize(%d, %#x, %v) = %d, want %d", c.size, c.hdr, c.has, got, c.want)
		}
	}
}

// TestFreeEndsAllocation: free ends an allocation at once. A fault on the
// freed range before anything reuses it belongs to no allocation (the
// class its memory is in); after malloc hands the same chunk out again it
// belongs to the new allocation; free of an mmap'd chunk ends it too (its
// interval starts at ptr-16), and a second free of the same pointer is
// unknown.
func TestFreeEndsAllocation(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, fakeRegions{})
	// site 1: 64 KiB heap block at 0x600010, [0x600008, 0x610010).
	alloc(tr, 1, KindMalloc, 65536, 0x600010, 1)
	fault(tr, 2, 0x600010, false) // live: site 1
	tr.Free(&Free{Pid: pid, Tid: tid, Time: 3, Ptr: 0x600010})
	fault(tr, 4, 0x601000, false) // freed, not reused: [heap]
	fault(tr, 5, 0x602000, false) // [heap]
	// site 2 gets the same chunk back (an exact fit from a bin).
	alloc(tr, 6, KindMalloc, 65536, 0x600010, 2)
	fault(tr, 7, 0x603000, false) // site 2
	fault(tr, 8, 0x604000, false) // site 2
	fault(tr, 9, 0x605000, false) // site 2
	// site 3: mmap'd (header says IS_MMAPPED), chunk at 0x7000000000.
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 10, Kind: KindMalloc, Size: 1 << 20, Stack: 3})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 11, Kind: KindMalloc, Ptr: 0x7000000010, Hdr: 0x101002, HasHdr: true})
	fault(tr, 12, 0x7000000000, false) // the chunk's header page: site 3
	tr.Free(&Free{Pid: pid, Tid: tid, Time: 13, Ptr: 0x7000000010})
	fault(tr, 14, 0x7000001000, false) // unmapped by free in reality; no allocation here
	tr.Free(&Free{Pid: pid, Tid: tid, Time: 15, Ptr: 0x7000000010})
	tr.Close()
	if s.bySite[1] != 1 || s.bySite[2] != 3 || s.bySite[3] != 1 {
		t.Errorf("faults by site %v, want 1: 1, 2: 3, 3: 1", s.bySite)
	}
	if s.class["[heap]"] != 2 || s.class["[anon]"] != 1 {
		t.Errorf("unattributed by class %v, want [heap] 2 (freed, not reused), [anon] 1", s.class)
	}
	st := tr.Stats()
	if st.Frees != 3 || st.UnknownFrees != 1 || st.Evicted != 0 || tr.liveCount() != 0 {
		t.Errorf("frees %d unknown %d evicted %d live %d, want 3 1 0 0", st.Frees, st.UnknownFrees, st.Evicted, tr.liveCount())
	}
}

// TestFreeBeforeFlagsDecided: an allocation freed before any fault
// decided its flags is still reported once, with its pending faults.
func TestFreeBeforeFlagsDecided(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, fakeRegions{})
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 1, Kind: KindMalloc, Size: 8192, Stack: 1})
	fault(tr, 2, 0x600008, false) // inside malloc, in the chunk: held until return
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 3, Kind: KindMalloc, Ptr: 0x600010})
	tr.Free(&Free{Pid: pid, Tid: tid, Time: 4, Ptr: 0x600010})
	tr.Close()
	if len(s.allocs) != 1 || s.bySite[1] != 1 {
		t.Errorf("allocs %v faults by site %v, want one allocation with 1 fault", s.allocs, s.bySite)
	}
}

// TestLeafWhenEntryHasNoStack: an entry without a stack (faultline
// record's range events) takes the return's Leaf as its site; one with a
// stack keeps it.
func TestLeafWhenEntryHasNoStack(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 1, Kind: KindMalloc, Size: 100})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 2, Kind: KindMalloc, Ptr: 0x600010, RetIP: 0x401234, Leaf: 7})
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 3, Kind: KindMalloc, Size: 100, Stack: 9})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 4, Kind: KindMalloc, Ptr: 0x600090, RetIP: 0x401234, Leaf: 7})
	tr.Close()
	want := []string{"site=7 size=100 ptr=0x600010 flags=fast", "site=9 size=100 ptr=0x600090 flags=fast"}
	if strings.Join(s.allocs, "\n") != strings.Join(want, "\n") {
		t.Errorf("allocations\n%s\nwant\n%s", strings.Join(s.allocs, "\n"), strings.Join(want, "\n"))
	}
}

// TestChainedReallocArray: glibc's reallocarray tail-calls realloc, so
// realloc's entry sees the [uprobes] trampoline as its return address
// (CallerRet 0) and both return probes fire on the one return, with the
// same pointer and return address: one allocation, the old block ended,
// nothing unpaired.
func TestChainedReallocArray(t *testing.T) {
	s := newRecSink()
	tr := NewTracker(DefaultConfig(), s, nil)
	alloc(tr, 1, KindMalloc, 64, 0x600010, 1)
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 2, Kind: KindReallocArray, Size: 10 * 100, OldPtr: 0x600010, Stack: 2, CallerRet: 0x401234})
	tr.Entry(&Entry{Pid: pid, Tid: tid, Time: 3, Kind: KindRealloc, Size: 1000, OldPtr: 0x600010, Stack: 3})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 4, Kind: KindRealloc, Ptr: 0x700010, RetIP: 0x401234})
	tr.Return(&Return{Pid: pid, Tid: tid, Time: 5, Kind: KindReallocArray, Ptr: 0x700010, RetIP: 0x401234})
	fault(tr, 6, 0x700010, false)
	fault(tr, 7, 0x600010, false) // the old block: ended by the realloc
	tr.Close()
	st := tr.Stats()
	if st.Allocations != 2 || st.ChainedReturns != 1 || st.UnpairedEntries+st.UnpairedReturns != 0 {
		t.Errorf("allocations %d chained %d unpaired %d+%d, want 2 1 0", st.Allocations, st.ChainedReturns, st.UnpairedEntries, st.UnpairedReturns)
	}
	if s.bySite[3] != 1 || s.bySite[1] != 0 {
		t.Errorf("faults by site %v, want the new block's (site 3) 1, the old one's 0", s.bySite)
	}
}
