package analyze

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
	"github.com/faultline/faultline/symbolize"
)

// siteSink records each allocation's size and whether it got a stack.
type siteSink struct{ sites map[uint64]attribute.StackID }

func (s *siteSink) Allocation(a *attribute.Allocation)            { s.sites[a.Size] = a.Site }
func (s *siteSink) Fault(*attribute.Fault, *attribute.Allocation) {}

// TestStackJoinSynthetic drives the join with hand-made samples on one
// thread: event 0 is the malloc entry without stacks, event 1 the same
// tracepoint with a callchain (its stack instance), event 2 the return.
// Raw payloads are the 8-byte size. Expected: a stack sample attaches to
// the call whose payload it repeats, in either order; one whose call does
// not follow (or differs) is dropped as unmatched; no stack sample ever
// makes a call.
func TestStackJoinSynthetic(t *testing.T) {
	sess := emptySession(t)
	size := &perfdata.TraceField{Name: "size", Offset: 0, Size: 8}
	ptr := &perfdata.TraceField{Name: "ptr", Offset: 0, Size: 8}
	evs := []*perfdata.Event{
		{Index: 0, Name: "g:malloc", Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 7, SampleType: perfdata.SampleRaw}},
		{Index: 1, Name: "g:malloc", Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 7, SampleType: perfdata.SampleRaw | perfdata.SampleCallchain}},
		{Index: 2, Name: "g:malloc__return", Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 8, SampleType: perfdata.SampleRaw}},
	}
	infos := []*eventInfo{
		{ev: evs[0], role: RoleAllocEntry, size: size},
		{ev: evs[1], role: RoleAllocEntry, size: size},
		{ev: evs[2], role: RoleAllocReturn, ptr: ptr},
	}
	pairStackEvents(infos)
	if infos[1].role != RoleStack || infos[1].stackFor != 0 || !infos[0].twin || infos[2].twin {
		t.Fatalf("pairing: %+v %+v %+v", *infos[0], *infos[1], *infos[2])
	}
	sink := &siteSink{sites: map[uint64]attribute.StackID{}}
	ru := testRun(sess, infos, sink)
	var now uint64
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	feed := func(ev int, v uint64) {
		now++
		smp := &perfdata.Sample{Event: evs[ev], Raw: u64(v)}
		smp.Pid, smp.Tid, smp.Time, smp.Has = 1, 1, now, perfdata.SampleTime
		if ev == 1 {
			smp.Callchain = []uint64{perfdata.ContextUser, 0x401000 + v, 0x402000}
		}
		ru.sample(smp)
	}
	ret := func(p uint64) { feed(2, p) }
	feed(0, 100) // range first, then its stack
	feed(1, 100)
	ret(0x10010)
	feed(1, 200) // stack first, then its range
	feed(0, 200)
	ret(0x20010)
	feed(1, 300) // a stack whose call is not this one (lost): unmatched
	feed(0, 301)
	ret(0x30010)
	feed(0, 400) // no stack at all: fed when the return comes
	ret(0x40010)
	feed(1, 500) // an orphan stack at the end
	ru.st.releaseAll()
	ru.tr.Close()
	st := ru.tr.Stats()
	if st.Entries != 4 || st.Allocations != 4 {
		t.Errorf("entries %d allocations %d, want 4 4: stack samples never make calls", st.Entries, st.Allocations)
	}
	for _, sz := range []uint64{100, 200} {
		if sink.sites[sz] == 0 {
			t.Errorf("allocation of %d has no stack; its stack sample should have joined it", sz)
		}
	}
	for _, sz := range []uint64{301, 400} {
		if s, ok := sink.sites[sz]; !ok || s != 0 {
			t.Errorf("allocation of %d: site %d (present %v), want made without a stack", sz, s, ok)
		}
	}
	if ru.st.join != (StackJoin{Joined: 2, Unmatched: 2, Bare: 2}) {
		t.Errorf("join %+v, want 2 joined, 2 unmatched, 2 bare", ru.st.join)
	}
}

// TestStackJoinAllocatesNothing: in steady state a call's range entry, its
// stack sample, its return (leaf from __probe_ret_ip) and its free allocate
// nothing in the analysis.
func TestStackJoinAllocatesNothing(t *testing.T) {
	ru, cycle := joinCycle(t)
	if n := testing.AllocsPerRun(200, cycle); n != 0 {
		t.Errorf("%v allocations per cycle (entry, stack, return, free; entry with top words, return, free), want 0", n)
	}
	if ru.st.top.User+ru.st.top.Library+ru.st.top.Short < 210 {
		t.Errorf("top stacks %+v: the entries with top words were not walked", ru.st.top)
	}
	if ru.st.join.Joined < 210 || ru.tr.Stats().Allocations < 210 {
		t.Errorf("joined %d, allocations %d: the cycle did not run as meant", ru.st.join.Joined, ru.tr.Stats().Allocations)
	}
}

// BenchmarkStackJoin is the per-sample cost of stacks.go's path: one
// cycle of TestStackJoinAllocatesNothing (7 samples: a call joined to its
// stack sample, one with its leaf from its top stack words, their returns
// and frees) per op.
func BenchmarkStackJoin(b *testing.B) {
	_, cycle := joinCycle(b)
	b.ReportAllocs()
	for b.Loop() {
		cycle()
	}
}

// joinCycle returns a run in leaf mode over hand-made events and a cycle of
// 7 samples through it, run 10 times already (the tables warm).
func joinCycle(tb testing.TB) (*run, func()) {
	sess := emptySession(tb)
	f8 := func(name string, off int) *perfdata.TraceField {
		return &perfdata.TraceField{Name: name, Offset: off, Size: 8}
	}
	evs := []*perfdata.Event{
		{Index: 0, Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 7, SampleType: perfdata.SampleRaw}},
		{Index: 1, Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 7, SampleType: perfdata.SampleRaw | perfdata.SampleCallchain}},
		{Index: 2, Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 8, SampleType: perfdata.SampleRaw}},
		{Index: 3, Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 9, SampleType: perfdata.SampleRaw}},
		{Index: 4, Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 10, SampleType: perfdata.SampleRaw}},
	}
	// Event 4: an entry without a stack twin whose raw data carries the
	// top of the stack (faultline record's fields): size, __probe_ip, sp,
	// bp and 4 words.
	top := &eventInfo{ev: evs[4], role: RoleAllocEntry, size: f8("size", 0),
		stackTop: stackTop{probeIP: f8("__probe_ip", 8), topSP: f8(schema.TopStackSP, 16), topBP: f8(schema.TopStackBP, 24)}}
	for i := 0; i < 4; i++ {
		top.topWords = append(top.topWords, f8(schema.TopStackWord(i), 32+8*i))
	}
	infos := []*eventInfo{
		{ev: evs[0], role: RoleAllocEntry, size: f8("size", 0)},
		{ev: evs[1], role: RoleAllocEntry, size: f8("size", 0)},
		{ev: evs[2], role: RoleAllocReturn, ptr: f8("ptr", 0), retIP: f8("__probe_ret_ip", 8)},
		{ev: evs[3], role: RoleFree, ptr: f8("ptr", 0)},
		top,
	}
	pairStackEvents(infos)
	ru := testRun(sess, infos, &siteSink{sites: map[uint64]attribute.StackID{}})
	ru.st.leafMode = true
	mk := func(ev int, raw []byte) *perfdata.Sample {
		smp := &perfdata.Sample{Event: evs[ev], Raw: raw}
		smp.Pid, smp.Tid, smp.Has = 1, 1, perfdata.SampleTime
		return smp
	}
	le := binary.LittleEndian
	entry := mk(0, le.AppendUint64(nil, 64))
	stack := mk(1, le.AppendUint64(nil, 64))
	stack.Callchain = []uint64{perfdata.ContextUser, 0x401000, 0x402000}
	ret := mk(2, le.AppendUint64(le.AppendUint64(nil, 0x600010), 0x401005))
	free := mk(3, le.AppendUint64(nil, 0x600010))
	topRaw := le.AppendUint64(nil, 64)
	for _, v := range []uint64{0x7f0000001000, 0x7ffc0000f000, 0x7ffc0000f100, 0x401005, 0, 0x402000, 0} {
		topRaw = le.AppendUint64(topRaw, v)
	}
	topEntry := mk(4, topRaw)
	var now uint64
	cycle := func() {
		for _, s := range []*perfdata.Sample{entry, stack, ret, free, topEntry, ret, free} {
			now++
			s.Time = now
			ru.sample(s)
		}
	}
	for i := 0; i < 10; i++ {
		cycle()
	}
	return ru, cycle
}

// faultSink records each fault's stack by address.
type faultSink struct{ stacks map[uint64]attribute.StackID }

func (s *faultSink) Allocation(*attribute.Allocation)                  {}
func (s *faultSink) Fault(f *attribute.Fault, _ *attribute.Allocation) { s.stacks[f.Addr] = f.Stack }

// TestFaultStackJoin: page-faults opened twice (--fault-stacks): software
// events have no raw payload, so the halves of one fault match by address
// and IP; each fault is counted once, with the stack when its half came.
func TestFaultStackJoin(t *testing.T) {
	sess := emptySession(t)
	evs := []*perfdata.Event{
		{Index: 0, Attr: perfdata.Attr{Type: perfdata.TypeSoftware, Config: uint64(perfdata.SWPageFaults), SampleType: perfdata.SampleAddr}},
		{Index: 1, Attr: perfdata.Attr{Type: perfdata.TypeSoftware, Config: uint64(perfdata.SWPageFaults), SampleType: perfdata.SampleAddr | perfdata.SampleCallchain}},
	}
	infos := []*eventInfo{faultInfo(&eventInfo{ev: evs[0]}), faultInfo(&eventInfo{ev: evs[1]})}
	pairStackEvents(infos)
	if infos[1].role != RoleStack || !infos[0].twin {
		t.Fatalf("pairing: %v %v", infos[0].role, infos[1].role)
	}
	sink := &faultSink{stacks: map[uint64]attribute.StackID{}}
	ru := testRun(sess, infos, sink)
	var now uint64
	feed := func(ev int, addr uint64) {
		now++
		smp := &perfdata.Sample{Event: evs[ev], Addr: addr, IP: 0x401000}
		smp.Pid, smp.Tid, smp.Time, smp.Has = 1, 1, now, perfdata.SampleTime
		if ev == 1 {
			smp.Callchain = []uint64{perfdata.ContextUser, 0x401000, 0x402000}
		}
		ru.sample(smp)
	}
	feed(0, 0x1000) // range, then stack
	feed(1, 0x1000)
	feed(1, 0x2000) // stack, then range
	feed(0, 0x2000)
	feed(0, 0x3000) // range without stack: fed when the next fault comes
	feed(0, 0x4000) // held to the end
	ru.st.releaseAll()
	if st := ru.tr.Stats(); st.Faults != 4 {
		t.Errorf("faults %d, want 4", st.Faults)
	}
	if sink.stacks[0x1000] == 0 || sink.stacks[0x2000] == 0 || sink.stacks[0x3000] != 0 || sink.stacks[0x4000] != 0 {
		t.Errorf("fault stacks %v: want 0x1000 and 0x2000 with a stack, 0x3000 and 0x4000 without", sink.stacks)
	}
}

// TestPosixMemalignStatusReturn: posix_memalign's return value is a status
// (0 on success), not the pointer: such a return makes no allocation and is
// counted as lacking its pointer, not as a failed call.
func TestPosixMemalignStatusReturn(t *testing.T) {
	sess := emptySession(t)
	f8 := func(name string, off int) perfdata.TraceField {
		return perfdata.TraceField{Name: name, Offset: off, Size: 8}
	}
	fmtOf := func(name string, fields ...perfdata.TraceField) *perfdata.TraceFormat {
		return &perfdata.TraceFormat{System: "g", Name: name, Fields: fields}
	}
	evs := []*perfdata.Event{
		{Index: 0, Name: "g:posix_memalign", Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 7, SampleType: perfdata.SampleRaw},
			Format: fmtOf("posix_memalign", f8("memptr", 0), f8("alignment", 8), f8("size", 16))},
		{Index: 1, Name: "g:posix_memalign__return", Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 8, SampleType: perfdata.SampleRaw},
			Format: fmtOf("posix_memalign__return", f8("ptr", 0))},
	}
	var infos []*eventInfo
	for _, ev := range evs {
		in, err := classify(ev, nil)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, in)
	}
	if !infos[1].statusReturn || infos[0].role != RoleAllocEntry {
		t.Fatalf("classify: %+v %+v", *infos[0], *infos[1])
	}
	ru := testRun(sess, infos, &siteSink{sites: map[uint64]attribute.StackID{}})
	le := binary.LittleEndian
	entry := &perfdata.Sample{Event: evs[0], Raw: le.AppendUint64(le.AppendUint64(le.AppendUint64(nil, 0x7ff0), 64), 4096)}
	ret := &perfdata.Sample{Event: evs[1], Raw: le.AppendUint64(nil, 0)}
	for i, s := range []*perfdata.Sample{entry, ret} {
		s.Pid, s.Tid, s.Time, s.Has = 1, 1, uint64(i+1), perfdata.SampleTime
		ru.sample(s)
	}
	if st := ru.tr.Stats(); ru.noPointer != 1 || st.Allocations != 0 || st.Entries != 1 {
		t.Errorf("no pointer %d, allocations %d, entries %d; want 1 0 1", ru.noPointer, st.Allocations, st.Entries)
	}
}

// testRun is a run over infos with empty tables, its tracker reporting to
// sink (what Run sets up before the first record).
func testRun(sess *symbolize.Session, infos []*eventInfo, sink attribute.Sink) *run {
	ru := &run{sess: sess, infos: infos, runCounts: runCounts{counts: make([]EventSummary, len(infos)), classes: map[string]uint64{}}, st: newStacks(sess), mm: newMemMaps()}
	ru.tr = attribute.NewTracker(attribute.DefaultConfig(), sink, nil)
	ru.st.out = ru.tr
	return ru
}

// emptySession is a session without binaries, environment or recording
// metadata, closed when the test ends.
func emptySession(t testing.TB) *symbolize.Session {
	t.Helper()
	sess, err := symbolize.NewSession(symbolize.Config{Getenv: func(string) string { return "" }}, &perfdata.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// TestStackRolesOldNames: testdata/leaf/default.data was recorded before
// faultline record named its stack instances (…/stack-big/,
// …/stack-1inN/): its three events named faultline_12493:malloc (perf
// evlist -v: no stack, period 1; stack, period 1; stack, period 61) are
// still a range event and its two stack instances, paired by their attrs.
// The new names are checked live (TestRecordLiveFaultStacks).
func TestStackRolesOldNames(t *testing.T) {
	res := analyzeDir(t, "leaf", "default", report.ByAlloc)
	var roles []string
	for _, e := range res.Summary.Events {
		if e.Name == "faultline_12493:malloc" {
			roles = append(roles, e.Role)
		}
	}
	if got := strings.Join(roles, " "); got != "alloc-entry stack stack" {
		t.Errorf("roles of faultline_12493:malloc: %s, want alloc-entry stack stack", got)
	}
	if j := res.Summary.StackJoin; j == nil || j.Joined == 0 || j.Unmatched != 0 {
		t.Errorf("stack join %+v: want stacks joined to their calls", j)
	}
}

// TestCallersPerProgram: a leaf in a shared library is the same location in
// every process that maps it; the callers sampled there in one program
// (comm) are not another program's. Before, a shell's setlocale calls got
// env's sampled callers, and faults moved between the two programs' sites
// from run to run.
func TestCallersPerProgram(t *testing.T) {
	st := newStacks(emptySession(t))
	const leaf = attribute.StackID(5)
	st.countCaller(callerKey{leaf, "bash"}, 10, true)
	st.countCaller(callerKey{leaf, "bash"}, 10, true)
	st.countCaller(callerKey{leaf, "env"}, 11, true)
	if got := st.weights(leaf, "bash"); len(got) != 1 || got[0] != (report.Weighted{Stack: 10, Weight: 2}) {
		t.Errorf("bash's callers at the leaf: %+v, want stack 10 twice", got)
	}
	if got := st.weights(leaf, "env"); len(got) != 1 || got[0] != (report.Weighted{Stack: 11, Weight: 1}) {
		t.Errorf("env's callers at the leaf: %+v, want stack 11 once", got)
	}
	if got := st.weights(leaf, "python3"); got != nil {
		t.Errorf("python3 sampled nothing at the leaf, got %+v", got)
	}
}

// feedLog records what stacks feeds on, in order: "entry SIZE STACK" or
// "fault ADDR STACK".
type feedLog []string

func (l *feedLog) Entry(e *attribute.Entry) {
	*l = append(*l, fmt.Sprintf("entry %d %d", e.Size, e.Stack))
}
func (l *feedLog) Fault(f *attribute.Fault) {
	*l = append(*l, fmt.Sprintf("fault %#x %d", f.Addr, f.Stack))
}

// TestStacksFeedOrder drives stacks alone, through settle, entry, fault
// and stack, as the run does: a held half is fed before anything later of
// its thread (settle), a joined call carries its stack, other threads'
// samples do not release it, and releaseAll feeds what is left in thread
// order. The stack ids are made up (frames is not asked for them: no leaf
// inference without leafMode).
func TestStacksFeedOrder(t *testing.T) {
	ev := func(i int, st perfdata.SampleFormat) *perfdata.Event {
		return &perfdata.Event{Index: i, Attr: perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 7, SampleType: st}}
	}
	rng := &eventInfo{ev: ev(0, perfdata.SampleRaw), role: RoleAllocEntry}
	stk := &eventInfo{ev: ev(1, perfdata.SampleRaw|perfdata.SampleCallchain), role: RoleAllocEntry}
	other := &eventInfo{ev: ev(2, perfdata.SampleRaw), role: RoleFree}
	pairStackEvents([]*eventInfo{rng, stk, other})
	var log feedLog
	s := newStacks(emptySession(t))
	s.out = &log
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	smp := func(in *eventInfo, tid uint32, size uint64) *perfdata.Sample {
		p := &perfdata.Sample{Event: in.ev, Raw: u64(size)}
		p.Pid, p.Tid = 1, tid
		return p
	}
	entry := func(tid uint32, size uint64) {
		p := smp(rng, tid, size)
		s.settle(rng, p)
		s.entry(rng, p, &attribute.Entry{Pid: 1, Tid: tid, Size: size}, false)
	}
	stack := func(tid uint32, size uint64, id attribute.StackID) {
		p := smp(stk, tid, size)
		s.settle(stk, p)
		s.stack(stk, rng, p, id, 0)
	}
	free := func(tid uint32) {
		p := smp(other, tid, 0)
		s.settle(other, p)
	}
	entry(1, 100)     // held
	entry(2, 200)     // another thread's: held beside it
	stack(1, 100, 11) // joins thread 1's: fed with stack 11
	stack(2, 999, 22) // not thread 2's call: 200 fed bare, then the stack is held
	entry(2, 300)     // not the held stack's call: the stack is dropped, 300 held
	free(2)           // 300 fed bare before the free
	if len(log) != 3 {
		t.Errorf("after thread 2's free: fed %q; its held call must come before the free", log)
	}
	entry(3, 400)     // held to the end
	stack(4, 500, 44) // an orphan stack: dropped at the end
	s.releaseAll()
	want := []string{"entry 100 11", "entry 200 0", "entry 300 0", "entry 400 0"}
	if !slices.Equal(log, want) {
		t.Errorf("fed %q, want %q", log, want)
	}
	if s.join != (StackJoin{Joined: 1, Unmatched: 2, Bare: 3}) {
		t.Errorf("join %+v, want 1 joined, 2 unmatched, 3 bare", s.join)
	}
}
