package recorder

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
	"golang.org/x/sys/unix"
)

// The in-process method. The program runs with the shim preloaded
// (package shim): each of its threads writes its allocator calls into a
// shared-memory ring of its own, with CLOCK_MONOTONIC times. The recorder
// opens only the kernel's events (page faults, the MMAP2/COMM/FORK/EXIT
// sideband, fault stacks if asked) on the same clock, and turns each shim
// record into a sample of a tracepoint-shaped event whose format it writes
// into the file's TRACING_DATA itself: the same event names and fields as
// the uprobe method's probes (malloc: size, sp, bp, s0…; malloc__return:
// ptr, hdr; free: ptr), so perf script and analyze read both alike. A
// sampled call's registers and stack become a second sample of the entry's
// stack instance, right after it, as the kernel emits the two samples of a
// uprobe hit.
//
// Order. perf readers sort the records between two FINISHED_ROUND records
// and trust that nothing after a round is older than what came before the
// previous one. The recorder therefore writes, each round, only records
// stamped at or before a watermark: now minus a margin for the kernel's
// own write latency, held back while some ring is busy (its owner has read
// the clock but not committed: that record may be older than now).

// shimIDBase numbers the in-process events: a tracepoint id (common_type
// is 16 bits) far above the ids tracefs hands out, so a recording that
// mixes them with real tracepoints has no clash.
const shimIDBase = 0xff00

// shimSampleIDBase numbers the in-process events' sample ids, far above
// the kernel's (which count up from 1).
const shimSampleIDBase = 1 << 56

// watermarkMargin is how far behind now the watermark stays for the
// kernel's records: the time a fault sample takes from its clock read to
// its ring.
const watermarkMargin = 100 * time.Microsecond

// staleBusy is how long a ring may stay busy at one head before its owner
// is checked: a thread killed between clock read and commit never clears
// its flag.
const staleBusy = 50 * time.Millisecond

// InProcessSource records the allocator calls of a command it starts with the
// shim preloaded (package shim): each thread of the program writes its
// calls into a shared-memory ring of its own.
type InProcessSource struct {
	RingBytes int // each thread's ring
	Slots     int // rings: threads alive at once that are recorded
	// Glibc says the allocator is glibc's (returns then carry the chunk
	// header).
	Glibc bool
	// TopWords is how many top-of-stack words each entry carries.
	TopWords int
	Wait     time.Duration // how long a thread waits for room (0: shimWait)
	// TSC lets the shim stamp calls from the CPU's time-stamp counter
	// (shim.TSCUsable says where it may).
	TSC bool
	// MapCalls: the shim records the memory-map calls the program makes
	// through the C library (inproc_mapcalls.go), in place of
	// Config.MapCalls' tracepoints.
	MapCalls bool
	// Family is the program's allocator family: the shim object
	// preloaded records that family's own entry points too
	// (inproc_family.go).
	Family schema.Family
	// PerCall writes each call as a sample of its own, not packed
	// (inproc_pack.go).
	PerCall bool
}

func (o *InProcessSource) start(s *session) (source, error) {
	cfg := s.cfg
	if cfg.Cmd == "" || cfg.All {
		return nil, errors.New("the in-process method records a command it starts (not -p or -a)")
	}
	region, err := shim.NewRegion(o.regionOptions(cfg))
	if err != nil {
		return nil, err
	}
	ip := newInproc(s, region, o)
	ip.tr.launcher, ip.tr.env = region.Launcher(), region.Env(os.Getenv("LD_PRELOAD"))
	ip.shimCopy = publicShim(region.Launcher())
	ip.tr.env = withPublicShim(ip.tr.env, region.Launcher(), ip.shimCopy)
	return ip, nil
}

// regionOptions are the shim region's options for o in a session of cfg.
func (o *InProcessSource) regionOptions(cfg *Config) shim.Options {
	return shim.Options{
		Slots: o.Slots, RingBytes: o.RingBytes,
		StackSize: cfg.StackSize, StackEvery: uint32(min(cfg.StackEvery, math.MaxUint32)), StackMin: cfg.StackMin,
		Words: o.TopWords, Glibc: o.Glibc, WaitNs: uint64(cmp.Or(o.Wait, shimWait)),
		TSC: o.TSC, MapCalls: o.MapCalls, Family: o.Family,
	}
}

// newInproc is the in-process method at work in session s, draining
// region.
func newInproc(s *session, region *shim.Region, o *InProcessSource) *inproc {
	ip := &inproc{s: s, tr: inprocTraits, region: region, words: o.TopWords, family: o.Family, perCall: o.PerCall,
		ringWatch: ringWatch{busySince: map[*shim.Ring]busyMark{}, idleAt: map[*shim.Ring]uint64{}},
		maps:      map[uint32]*procMaps{}, faults: map[uint32][]uint64{}, faultsSorted: map[uint32]bool{}}
	if o.MapCalls {
		ip.sys = &inprocSys{}
	}
	return ip
}

// inproc is the in-process method at work in a session.
type inproc struct {
	s      *session
	tr     sourceTraits
	region *shim.Region
	words  int
	family schema.Family // the shim object's (inproc_family.go)
	shimEvents
	scratch call       // the call being written
	sys     *inprocSys // the memory-map calls' events (nil: not recorded)
	// faults are the fault times of each thread in this round (sorted
	// on first use: faultsSorted): a call during which its thread
	// faulted is written as entry and return, so analyze charges those
	// faults to the allocator.
	faults       map[uint32][]uint64
	faultsSorted map[uint32]bool
	roundOrder
	sbuf2 []byte    // a stack sample being built
	raw   rawRecord // the record note is given (not allocated per record)
	ringWatch
	// maps are each process's executable mappings and the shim's own
	// (its rings and object: faults there are the recorder's, not the
	// program's).
	maps map[uint32]*procMaps
	// faultIDs are the fault events' sample ids (set at the first drain,
	// once the events are open).
	faultIDs map[uint64]bool
	// preload finds the programs that ran without the shim.
	preload schema.PreloadCheck
	// shimCopy is the copy of the object LD_PRELOAD names (nil: the
	// memfd's /proc entry).
	shimCopy *shimCopy
	perCall  bool // calls not packed (InProcessSource.PerCall)
	packing
}

// shimEvents are the in-process events by function. entry, ret: the
// events by function; big, small: the entries' stack instances (nil for
// free).
type shimEvents struct {
	entry, short, ret, call, big, small [shim.NumFuncs]*spec
}

// roundOrder is what keeps the records in order, round by round.
type roundOrder struct {
	// water is the watermark: records stamped later wait for a later round.
	water uint64
	final bool // the program is gone: write everything
	// pending holds kernel records stamped after the watermark.
	pending    []pendingRecord
	pendingBuf []byte
	spareBuf   []byte
	spare      []pendingRecord
	late       uint64 // records written after a round that promised them older
	// lastRound is the newest time written in the previous round.
	lastRound, thisRound uint64
}

// ringWatch follows the shim's rings: which are busy, since when, and
// when the last drain wrote something.
type ringWatch struct {
	busySince map[*shim.Ring]busyMark
	// idleAt is when each ring was last seen idle (not busy).
	idleAt   map[*shim.Ring]uint64
	lastReap time.Time
	// busyAt is when a drain last wrote something (time.Now().UnixNano()):
	// idleAfter later the waker sleeps longer (wakeups).
	busyAt atomic.Int64
}

// inprocTraits: the kernel's events on the shim's clock; the in-process
// method writes every call as it happens, several times the bytes a second
// of the uprobe method makes: zstd's fastest level, faster than the
// default level for a few more bytes (docs/performance.md). Everything is
// compressed (no KeepUp): a full ring holds the program up but loses
// nothing (drainInproc). A drain of more than busyBytes is repeated at
// once. start adds the launcher and the environment that preload the
// shim.
var inprocTraits = sourceTraits{method: "in-process", clock: true, writer: perfdata.WriterOptions{Level: 1}, busyBytes: 256 << 10, ordered: true}

func (ip *inproc) traits() sourceTraits { return ip.tr }

func (ip *inproc) close() {
	if ip.region != nil { // nil: an attach that did not happen
		ip.region.Close()
	}
	ip.shimCopy.remove()
}

// tracingData is the formats of the events the recorder writes itself
// (faultline:rss's and the shim's memory-map calls' among them) and of the
// memory-map calls' tracepoints, with the page and event headers of
// tracefs's ring buffer.
func (ip *inproc) tracingData() ([]byte, error) {
	return perfdata.BuildTracingData(uint32(os.Getpagesize()), []byte(ringHeaderPage), []byte(ringHeaderEvent),
		append(synthSystems(ip.s.specs), mapCallSystem(ip.s.cfg)...)), nil
}

// drain writes the kernel's rings and the shim's, up to the watermark
// (drainInproc). final: the program's remaining processes stop recording
// first (they may outlive it), and everything held for order is written.
func (ip *inproc) drain(final bool) (int, error) {
	if ip.faultIDs == nil {
		ip.faultIDs = map[uint64]bool{}
		for _, sp := range ip.s.specs {
			if sp.attr.Type == perfdata.TypeSoftware && perfdata.SoftwareEvent(sp.attr.Config).IsPageFault() && !sp.stack {
				for _, id := range ip.s.ids[sp] {
					ip.faultIDs[id] = true
				}
			}
		}
		if _, err := ip.packer(); err != nil {
			return 0, err
		}
	}
	if !final {
		n, err := ip.drainInproc()
		if n > 0 {
			ip.busyAt.Store(time.Now().UnixNano())
		}
		return n, err
	}
	s := ip.s
	ip.region.Detach()
	n, err := ip.drainInproc()
	if err != nil {
		return n, err
	}
	ip.final = true
	m, err := ip.drainInproc()
	if err != nil {
		return n + m, err
	}
	s.res.Shim = ip.region.Counters()
	s.res.Abandoned, s.res.AbandonedAt = ip.region.Abandoned()
	s.res.TSCJumps, s.res.TSCJumpAt = ip.region.TSCJumps()
	s.res.Late = ip.late
	s.res.Unshimmed, s.res.Detached = ip.preload.Result()
	return n + m, ip.writeUnrecorded()
}

type pendingRecord struct {
	typ       uint32
	misc      uint16
	off, size int
	time      uint64
	ring      *ring
}

type busyMark struct {
	head  uint64
	since time.Time
}

type addrRange struct{ lo, hi uint64 }

// procMaps is what the recorder follows of a process's mappings.
type procMaps struct {
	shim []addrRange
	// code: executable mappings; system marks a shared library in a
	// system directory (schema.IsSystemFile), whose calls to the
	// allocator need the top words for analyze to find the caller.
	code []codeRange
	last *codeRange // userCode's last hit, in code
}

type codeRange struct {
	addrRange
	system bool
}

func (m *procMaps) clone() *procMaps {
	return &procMaps{shim: append([]addrRange(nil), m.shim...), code: append([]codeRange(nil), m.code...)}
}

// addCode notes an executable mapping, replacing what it overlaps.
func (m *procMaps) addCode(r codeRange) {
	m.last = nil
	out := m.code[:0]
	for _, c := range m.code {
		if c.hi <= r.lo || c.lo >= r.hi {
			out = append(out, c)
		}
	}
	m.code = append(out, r)
	slices.SortFunc(m.code, func(a, b codeRange) int { return cmp.Compare(a.lo, b.lo) })
}

// userCode reports whether pc is in an executable mapping outside the
// system's libraries.
func (m *procMaps) userCode(pc uint64) bool {
	if l := m.last; l != nil && pc >= l.lo && pc < l.hi {
		return !l.system // most calls come from where the last one did
	}
	i, found := slices.BinarySearchFunc(m.code, pc, func(c codeRange, pc uint64) int { return cmp.Compare(c.lo, pc) })
	if !found {
		i--
	}
	if i < 0 || pc >= m.code[i].hi {
		return false
	}
	m.last = &m.code[i]
	return !m.last.system
}

func (ip *inproc) procMaps(pid uint32) *procMaps {
	m := ip.maps[pid]
	if m == nil {
		m = &procMaps{}
		ip.maps[pid] = m
	}
	return m
}

// shimSampleType is the in-process events' sample layout: no IP (the
// payload has the function's address) and no CPU (the shim does not know
// it); IDENTIFIER first, so perf and analyze find the event as for any
// other.
const shimSampleType = perfdata.SampleIdentifier | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleRaw

// events adds the in-process method's events to l. An allocating
// entry point has two: fn, with the uprobe's fields (the arguments, sp, bp
// and the top words of the stack, enough for analyze to step through
// operator new and other wrappers in system libraries to the caller), and
// fn_short with only sp and the return address, for the calls made
// straight from the program's own code, where the return address is the
// site (about half the bytes); such a call during which its thread took
// no fault is one sample, fn__call, at its return: the arguments and the
// return's fields, the return address (__probe_ret_ip) being the site.
// free has only its pointer.
func (ip *inproc) events(l *specList) {
	s := ip.s
	first := len(l.specs)
	tp := func(id uint64, st perfdata.SampleFormat, period uint64) perfdata.Attr {
		return perfdata.Attr{Type: perfdata.TypeTracepoint, Config: id, SamplePeriod: period,
			SampleType: st, Flags: l.flags | perfdata.AttrUseClockID, ClockID: unix.CLOCK_MONOTONIC}
	}
	next := uint64(shimIDBase)
	event := func(name string, fields []traceField) *spec {
		sp := &spec{name: schema.System + ":" + name, kind: kindRange, synthetic: true, attr: tp(next, shimSampleType, 1)}
		sp.format = shimFormat(name, next, fields)
		next++
		l.add(sp)
		return sp
	}
	for fn := shim.Func(0); fn < shim.NumFuncs; fn++ {
		if fn == shim.FuncFree {
			ip.entry[fn] = event(fn.String(), []traceField{{decl: "u64 ptr", size: 8}})
			continue
		}
		if !ip.shimRecords(fn) {
			continue
		}
		ip.entry[fn] = event(fn.String(), entryFields(fn, ip.words, true))
		ip.short[fn] = event(fn.String()+shortSuffix, entryFields(fn, -1, true))
		ip.ret[fn] = event(fn.String()+schema.ReturnSuffix, returnFields(fn))
		ip.call[fn] = event(fn.String()+schema.CallSuffix, append(entryFields(fn, 0, false), returnFields(fn)[1:]...))
	}
	ip.packEvent(l, tp(next, shimSampleType, 1))
	next++
	if s.cfg.StackSize > 0 {
		ip.deltaEvent(l, tp(next, shimSampleType, 1))
		next++
		ip.stackEvents(l)
	}
	if ip.sys != nil {
		ip.mapCallEvents(l)
	}
	if s.cfg.FaultStacks {
		// The page faults' stack instance (buildSpecs) needs a ring.
		l.addDummy(kindStack)
	}
	sid := uint64(shimSampleIDBase)
	for _, sp := range l.specs[first:] {
		if sp.synthetic {
			sp.synthID = sid
			sid++
		}
	}
}

// stackEvents adds the entries' stack instances: one for the calls of at
// least StackMin bytes, one for 1 in StackEvery of the others.
func (ip *inproc) stackEvents(l *specList) {
	s := ip.s
	for fn := shim.Func(0); fn < shim.NumFuncs; fn++ {
		e := ip.entry[fn]
		if fn == shim.FuncFree || e == nil {
			continue
		}
		big, small := sizeFilters(s.cfg.StackMin)
		if slices.Contains(fn.Args(), "nmemb") {
			big, small = fmt.Sprintf("nmemb × size >= %d", s.cfg.StackMin), fmt.Sprintf("nmemb × size < %d", s.cfg.StackMin)
		}
		a := e.attr
		ip.big[fn] = &spec{name: e.name + stackBigSuffix, kind: kindStack, stack: true, synthetic: true, filter: big, attr: l.withStack(a)}
		l.add(ip.big[fn])
		a.SamplePeriod = s.cfg.StackEvery
		ip.small[fn] = &spec{name: e.name + stackEverySuffix(s.cfg.StackEvery), kind: kindStack, stack: true, synthetic: true, filter: small, attr: l.withStack(a)}
		l.add(ip.small[fn])
	}
}

// shortSuffix names an entry event without the top words; analyze reads
// "malloc_short" as malloc (a perf probe user's "_suffix" variant).
const shortSuffix = "_short"

// traceField is one field of an in-process event's format.
type traceField struct {
	decl string // "unsigned long __probe_ip", "u64 size", "s32 ret"
	size int
	sign bool
}

// entryFields lists an entry event's fields: the arguments, then for an
// allocating one sp, bp and words top-of-stack words, or with words < 0
// sp and the return address s0 only.
func entryFields(fn shim.Func, words int, sized bool) []traceField {
	f := []traceField{{decl: "unsigned long __probe_ip", size: 8}}
	for _, a := range fn.Args() {
		f = append(f, traceField{decl: "u64 " + a, size: 8})
	}
	switch {
	case !sized:
	case words < 0:
		f = append(f, traceField{decl: "u64 sp", size: 8}, traceField{decl: "u64 s0", size: 8})
	default:
		f = append(f, traceField{decl: "u64 sp", size: 8}, traceField{decl: "u64 bp", size: 8})
		for i := 0; i < words; i++ {
			f = append(f, traceField{decl: fmt.Sprintf("u64 s%d", i), size: 8})
		}
	}
	return f
}

func returnFields(fn shim.Func) []traceField {
	f := []traceField{{decl: "unsigned long __probe_func", size: 8}, {decl: "unsigned long __probe_ret_ip", size: 8},
		{decl: "u64 ptr", size: 8}, {decl: "u64 hdr", size: 8}}
	if fn.Status() {
		// The status, beside the pointer the call stored (which a
		// return probe cannot read).
		f = append(f, traceField{decl: "s32 ret", size: 4, sign: true})
	}
	return f
}

// shimFormat writes an event format as tracefs does for a uprobe.
func shimFormat(name string, id uint64, fields []traceField) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nID: %d\nformat:\n", name, id)
	b.WriteString(schema.CommonFieldsFormat)
	off := 8
	var pf, args, probe []string
	for _, f := range fields {
		sign := 0
		if f.sign {
			sign = 1
		}
		fmt.Fprintf(&b, "\tfield:%s;\toffset:%d;\tsize:%d;\tsigned:%d;\n", f.decl, off, f.size, sign)
		off += f.size
		n := f.decl[strings.LastIndexByte(f.decl, ' ')+1:]
		switch {
		case strings.HasPrefix(n, "__probe"):
			probe = append(probe, "REC->"+n)
			continue
		case f.size == 4:
			pf = append(pf, n+"=%d")
		default:
			pf = append(pf, n+"=%Lu")
		}
		args = append(args, "REC->"+n)
	}
	// As tracefs prints a uprobe: "(ip)" or "(func <- return address)".
	head := ""
	switch len(probe) {
	case 1:
		head = "(%lx) "
	case 2:
		head = "(%lx <- %lx) "
	}
	fmt.Fprintf(&b, "\nprint fmt: \"%s%s\"", head, strings.Join(pf, " "))
	for _, a := range append(probe, args...) {
		b.WriteString(", " + a)
	}
	b.WriteString("\n")
	return []byte(b.String())
}

// monoNow is CLOCK_MONOTONIC in ns, the clock of every record.
func monoNow() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// recordTime is a kernel record's time: the sample's TIME field, or the
// sample_id trailer's (TID, TIME, CPU, IDENTIFIER) of other records.
func recordTime(typ uint32, d []byte) (uint64, bool) {
	if perfdata.RecordType(typ) == perfdata.RecordSample {
		if len(d) < 32 {
			return 0, false
		}
		return binary.NativeEndian.Uint64(d[24:]), true
	}
	if len(d) < 24 {
		return 0, false
	}
	return binary.NativeEndian.Uint64(d[len(d)-24:]), true
}

// drainInproc is drain for the in-process method: the kernel's rings and
// the shim's, up to the watermark.
func (ip *inproc) drainInproc() (int, error) {
	s := ip.s
	now := monoNow()
	// The exit snapshots queued so far go ahead of every kernel record
	// this drain writes, all older than now: a snapshot queued from now
	// on has its process's EXIT stamped later still (snapshotter.prompt).
	if err := s.writeSnapshots(); err != nil {
		return 0, err
	}
	rings := ip.region.Rings()
	// A ring seen idle now stamps its later records after now; one busy
	// (its owner between clock read and commit) may commit a record as
	// old as the last look that saw it idle.
	water := now - uint64(watermarkMargin)
	for _, g := range rings {
		if settled(g) {
			ip.idleAt[g] = now
		} else if !ip.staleRing(g) {
			water = min(water, ip.idleAt[g])
		}
	}
	if ip.final {
		ip.water = math.MaxUint64
	} else {
		ip.water = max(ip.water, water)
	}
	total := 0
	for tid, f := range ip.faults {
		if len(f) == 0 {
			delete(ip.faults, tid)
			delete(ip.faultsSorted, tid)
			continue
		}
		ip.faults[tid] = f[:0]
	}
	// The kernel's records, with those held from earlier rounds, in time
	// order: the mappings followed (procMaps) must change in the order
	// they did, and the rings of several CPUs interleave.
	s.eachKernelRecord(func(r *ring, raw *rawRecord) error {
		t, ok := recordTime(uint32(raw.Header.Type), raw.Data)
		if !ok {
			t = 0 // no time: first
		}
		off := len(ip.pendingBuf)
		ip.pendingBuf = append(ip.pendingBuf, raw.Data...)
		ip.pending = append(ip.pending, pendingRecord{typ: uint32(raw.Header.Type), misc: raw.Header.Misc, off: off, size: len(raw.Data), time: t, ring: r})
		return nil
	})
	slices.SortStableFunc(ip.pending, func(a, b pendingRecord) int { return cmp.Compare(a.time, b.time) })
	kept := ip.spare[:0]
	for _, p := range ip.pending {
		if p.time > ip.water {
			kept = append(kept, p)
			continue
		}
		switch perfdata.RecordType(p.typ) {
		case perfdata.RecordMmap2, perfdata.RecordFork, perfdata.RecordComm, perfdata.RecordExit:
			// The shim's records before a change of the mappings are
			// read against the mappings before it.
			for _, g := range rings {
				n, err := ip.drainRing(g, p.time-1)
				total += n
				if err != nil {
					return total, err
				}
			}
		}
		if err := ip.writeKernel(p.ring, p.typ, p.misc, ip.pendingBuf[p.off:p.off+p.size]); err != nil {
			return total, err
		}
		total += p.size
	}
	ip.spare, ip.pending = ip.pending, kept
	if len(ip.pending) == 0 {
		ip.pendingBuf = ip.pendingBuf[:0]
	} else if ip.pending[0].off > len(ip.pendingBuf)/2 {
		// Compact: the held records move to the front.
		buf := ip.spareBuf[:0]
		for i := range ip.pending {
			p := &ip.pending[i]
			off := len(buf)
			buf = append(buf, ip.pendingBuf[p.off:p.off+p.size]...)
			p.off = off
		}
		ip.spareBuf, ip.pendingBuf = ip.pendingBuf, buf
	}
	// Everything is compressed (no perfdata KeepUp): a full ring blocks
	// its thread, nothing is lost, and records stored raw to keep up cost
	// about what compressing them does, in page cache the kernel must
	// find and fill, while the file grows by their whole size.
	for _, g := range rings {
		n, err := ip.drainRing(g, ip.water)
		total += n
		if err != nil {
			return total, err
		}
	}
	if time.Since(ip.lastReap) > 100*time.Millisecond {
		ip.lastReap = time.Now()
		ip.reapRings(rings)
	}
	if total > 0 {
		if err := ip.flushPacked(); err != nil {
			return total, err
		}
		if err := s.w.WriteRecordParts(uint32(perfdata.RecordFinishedRound), 0, nil); err != nil {
			return total, err
		}
		ip.lastRound = max(ip.lastRound, ip.thisRound)
	}
	return total, nil
}

// settled reports whether g is idle, waiting out a commit in progress for
// a moment: the owner is busy only from its clock read to its commit,
// unless it was preempted in between. A head that moves means the record
// in progress was committed; the owner's next one reads the clock later.
func settled(g *shim.Ring) bool {
	if !g.Busy() {
		return true
	}
	head := g.Head()
	for i := 0; i < settleSpins; i++ {
		// A record committed inside a call written whole moves the
		// head but leaves the call's entry to come (shim.Ring.InCall).
		if !g.Busy() || g.Head() != head && !g.InCall() {
			return true
		}
	}
	return false
}

// settleSpins is how many times settled looks again at a busy ring: a
// commit takes tens of nanoseconds, so a few hundred looks see most of
// them through, and an owner preempted mid-record is not waited for.
const settleSpins = 256

// staleRing reports whether g's busy flag is to be ignored: it stayed at
// one head past staleBusy and its thread is gone.
func (ip *inproc) staleRing(g *shim.Ring) bool {
	head := g.Head()
	m, ok := ip.busySince[g]
	if !ok || m.head != head {
		ip.busySince[g] = busyMark{head: head, since: time.Now()}
		return false
	}
	if time.Since(m.since) < staleBusy {
		return false
	}
	return !threadAlive(g.Pid(), g.Tid()) || time.Since(m.since) > time.Second
}

func threadAlive(pid, tid uint32) bool {
	return unix.Tgkill(int(pid), int(tid), 0) != unix.ESRCH
}

// reapRings frees the rings of threads that are gone, once drained.
func (ip *inproc) reapRings(rings []*shim.Ring) {
	var dead []*shim.Ring
	for _, g := range rings {
		if g.Empty() && !threadAlive(g.Pid(), g.Tid()) {
			dead = append(dead, g)
		}
	}
	for _, g := range dead {
		delete(ip.busySince, g)
		delete(ip.idleAt, g)
		ip.region.Free(g)
	}
}

// writeKernel writes a record of the kernel's rings, dropping page faults
// on the shim's own memory and following its mappings.
func (ip *inproc) writeKernel(r *ring, typ uint32, misc uint16, body []byte) error {
	s := ip.s
	switch perfdata.RecordType(typ) {
	case perfdata.RecordSample:
		// IDENTIFIER, IP, TID (pid, tid), TIME, ADDR: faults' address.
		if len(body) >= 40 && ip.faultIDs[binary.NativeEndian.Uint64(body)] {
			tid := binary.NativeEndian.Uint32(body[20:])
			ip.faults[tid] = append(ip.faults[tid], binary.NativeEndian.Uint64(body[24:]))
			ip.faultsSorted[tid] = false
			if m := ip.maps[binary.NativeEndian.Uint32(body[16:])]; m != nil {
				addr := binary.NativeEndian.Uint64(body[32:])
				for _, r := range m.shim {
					if addr >= r.lo && addr < r.hi {
						s.res.ShimFaults++
						return nil
					}
				}
			}
		}
	case perfdata.RecordMmap2:
		// pid, tid, addr, len, pgoff, dev/build id (24), prot at 56,
		// flags, filename at 64.
		if len(body) > 64 {
			name := body[64:]
			if i := indexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			pid := binary.NativeEndian.Uint32(body)
			lo := binary.NativeEndian.Uint64(body[8:])
			r := addrRange{lo, lo + binary.NativeEndian.Uint64(body[16:])}
			m := ip.procMaps(pid)
			ip.preload.Mmap(pid, string(name))
			switch {
			case schema.IsShimFile(string(name)):
				m.shim = append(m.shim, r)
			case binary.NativeEndian.Uint32(body[56:])&unix.PROT_EXEC != 0:
				m.addCode(codeRange{r, schema.IsSystemFile(string(name))})
			}
		}
	case perfdata.RecordFork:
		// pid, ppid, tid, ptid: a new process inherits its parent's maps.
		if len(body) >= 16 {
			pid, ppid := binary.NativeEndian.Uint32(body), binary.NativeEndian.Uint32(body[4:])
			if m := ip.maps[ppid]; pid != ppid && m != nil {
				ip.maps[pid] = m.clone()
			}
		}
	case perfdata.RecordComm:
		if misc&perfdata.MiscCommExec != 0 && len(body) >= 8 {
			delete(ip.maps, binary.NativeEndian.Uint32(body))
			comm := body[8:]
			if i := indexByte(comm, 0); i >= 0 {
				comm = comm[:i]
			}
			ip.preload.Exec(binary.NativeEndian.Uint32(body), string(comm))
		}
	case perfdata.RecordExit:
		// pid, ppid, tid, ptid: the process is gone when its main thread is.
		if len(body) >= 12 && binary.NativeEndian.Uint32(body) == binary.NativeEndian.Uint32(body[8:]) {
			delete(ip.maps, binary.NativeEndian.Uint32(body))
			ip.preload.Exit(binary.NativeEndian.Uint32(body))
		}
	}
	ip.raw = rawRecord{Header: recordHeader{Type: perfdata.RecordType(typ), Misc: misc}, Data: body}
	if err := s.note(r, &ip.raw); err != nil {
		return err
	}
	if t, ok := recordTime(typ, body); ok {
		ip.stamp(t)
	}
	return s.w.WriteRecordParts(typ, misc, body)
}

// seen notes a shim sample stamped t, which covers from t0 (its entry):
// its time against the round promise (stamp), and the recording's first
// and last times.
func (ip *inproc) seen(t0, t uint64) {
	s := ip.s
	ip.stamp(t)
	if s.firstT == 0 || t0 < s.firstT {
		s.firstT = t0
	}
	if s.firstStamp == 0 || t < s.firstStamp {
		s.firstStamp = t
	}
	s.lastT = max(s.lastT, t)
}

// stamp checks a record's time against the round promise.
func (ip *inproc) stamp(t uint64) {
	if t < ip.lastRound {
		ip.late++
	}
	ip.thisRound = max(ip.thisRound, t)
}

// releaseEvery is how many bytes drainRing writes between handing the
// consumed part of a ring back to its owner.
const releaseEvery = 128 << 10

// drainRing writes g's records stamped up to limit (at most the
// watermark).
func (ip *inproc) drainRing(g *shim.Ring, limit uint64) (int, error) {
	head := g.Head()
	total, released := 0, 0
	defer g.Release()
	// The mappings and the faults change only between drains
	// (writeKernel).
	maps := ip.maps[g.Pid()]
	o := owner{g.Pid(), g.Tid()}
	faults := ip.threadFaults(o.tid)
	packing := ip.packing.pk != nil
	var rec, next shim.Record
	for {
		if total-released >= releaseEvery {
			// Room for the owner while the rest is drained: everything
			// consumed so far has been written (copied out of the ring).
			g.Release()
			released = total
		}
		ok, err := g.Peek(head, &rec)
		if err != nil {
			return total, err
		}
		if !ok || rec.Time > limit {
			return total, nil
		}
		if !rec.Valid(ip.words) {
			return total, corrupt(g, &rec)
		}
		g.Consume(&rec)
		if rec.Kind == shim.KindSys {
			n, err := ip.writeSys(o, &rec)
			total += n
			if err != nil {
				return total, err
			}
			continue
		}
		if rec.Kind == shim.KindCall || rec.Kind == shim.KindFree && packing {
			var n int
			switch {
			case rec.Kind == shim.KindFree || packing && !faultIn(faults, rec.EntryTime(), rec.Time):
				n, err = ip.packFast(o, &rec)
			default:
				n, err = ip.writeWhole(o, &rec)
			}
			total += n
			if err != nil {
				return total, err
			}
			continue
		}
		short := rec.Kind == shim.KindEntry && ip.shortEntry(maps, &rec)
		if short {
			// The call in one sample when its return is here too and
			// its thread took no fault in between.
			ok, err := g.Peek(head, &next)
			if err != nil {
				return total, err
			}
			if ok && next.Time <= limit && next.Kind == shim.KindReturn && next.Func == rec.Func && next.Valid(ip.words) &&
				!faultIn(faults, rec.Time, next.Time) {
				c := &ip.scratch
				pairCall(c, &rec, &next)
				n, err := ip.writeCall(o, c, wholeCall)
				total += n
				if err != nil {
					return total, err
				}
				g.Consume(&next)
				continue
			}
		}
		n, err := ip.writeShim(o, &rec, short)
		total += n
		if err != nil {
			return total, err
		}
	}
}

func corrupt(g *shim.Ring, rec *shim.Record) error {
	return fmt.Errorf("%w: a record of kind %d, function %d, %d bytes, of thread %d", shim.ErrCorrupt, rec.Kind, rec.Func, len(rec.Body), g.Tid())
}

// faultedIn reports whether thread tid took a fault between t0 and t1.
func (ip *inproc) faultedIn(tid uint32, t0, t1 uint64) bool {
	return faultIn(ip.threadFaults(tid), t0, t1)
}

// threadFaults returns thread tid's fault times of this round, sorted.
func (ip *inproc) threadFaults(tid uint32) []uint64 {
	f := ip.faults[tid]
	if len(f) > 0 && !ip.faultsSorted[tid] {
		slices.Sort(f)
		ip.faultsSorted[tid] = true
	}
	return f
}

// faultIn reports whether a time in the sorted f lies between t0 and t1.
func faultIn(f []uint64, t0, t1 uint64) bool {
	if len(f) == 0 {
		return false
	}
	i, _ := slices.BinarySearch(f, t0)
	return i < len(f) && f[i] <= t1
}

// shortEntry reports whether an entry goes without its top words: an
// allocating call without a stack, made from the program's own code (the
// return address in an executable mapping outside the system's
// libraries), where the return address alone is the site. The shim marks
// the calls from the program's executable itself (shim.FlagShort: it
// copied only that word); this finds those from the program's own
// libraries.
func (ip *inproc) shortEntry(m *procMaps, rec *shim.Record) bool {
	if rec.Flags&shim.FlagShort != 0 {
		return true
	}
	if m == nil || rec.Func == shim.FuncFree || rec.Flags&(shim.FlagStackBig|shim.FlagStackSmall) != 0 {
		return false
	}
	w, ok := rec.Words(ip.words)
	if !ok || len(w) < 8 {
		return false
	}
	return m.userCode(binary.NativeEndian.Uint64(w))
}

// call is a call made from the program's own code, entry and return:
// what a fn__call sample holds, or a short entry and a return.
type call struct {
	fn             shim.Func
	t0, t          uint64 // the entry's time and the return's
	ip             uint64
	args           [3]uint64
	sp             uint64 // at the entry
	retIP          uint64 // the return address: the site
	ptr, hdr, stat uint64
}

// pairCall sets c to the call of a short entry e and its return r.
func pairCall(c *call, e, r *shim.Record) {
	*c = call{fn: e.Func, t0: e.Time, t: r.Time, ip: e.IP(), sp: e.SP(), retIP: r.RetIP(), ptr: r.Ptr(), hdr: r.Hdr(),
		args: [3]uint64{e.Arg(0), e.Arg(1), e.Arg(2)}}
	if e.Func.Status() {
		c.stat = r.Status()
	}
}

// writeWhole writes a call the shim wrote whole (shim.KindCall): one
// fn__call sample, or, when its thread took a fault during it, its entry
// (fn_short, at the entry's time) and its return apart, as the shim's
// separate records of such a call would be written.
func (ip *inproc) writeWhole(g owner, rec *shim.Record) (int, error) {
	c := &ip.scratch
	// Field by field: a composite literal is built aside and copied.
	c.fn, c.t0, c.t, c.ip, c.sp = rec.Func, rec.EntryTime(), rec.Time, rec.IP(), rec.CallSP()
	c.retIP, c.ptr, c.hdr, c.stat = rec.RetIP(), rec.Ptr(), rec.Hdr(), 0
	c.args = [3]uint64{rec.CallArg(0), rec.CallArg(1), 0}
	if !ip.faultedIn(g.tid, c.t0, c.t) {
		return ip.writeCall(g, c, wholeCall)
	}
	n, err := ip.writeCall(g, c, callEntry)
	if err != nil {
		return n, err
	}
	m, err := ip.writeCall(g, c, callReturn)
	return n + m, err
}

// callPart is which sample of a call writeCall writes.
type callPart int

const (
	wholeCall  callPart = iota // fn__call, at the return's time
	callEntry                  // its short entry (fn_short), at the entry's
	callReturn                 // its return, at the return's
)

// writeCall writes a call, or a part of it, as one sample.
func (ip *inproc) writeCall(g owner, c *call, part callPart) (int, error) {
	t0, t, sp := c.t0, c.t, ip.call[c.fn]
	switch part {
	case callEntry:
		t, sp = c.t0, ip.short[c.fn]
	case callReturn:
		t0, sp = c.t, ip.ret[c.fn]
	}
	ip.seen(t0, t)
	if part == wholeCall {
		v := append(ip.packing.vals[:0], c.ip)
		v = append(v, c.args[:len(c.fn.Args())]...)
		v = append(v, c.retIP, c.ptr, c.hdr)
		if c.fn.Status() {
			v = append(v, c.stat)
		}
		ip.packing.vals = v
		if n, ok, err := ip.packValues(sp, g, t, v, c.fn.Status()); ok {
			return n, err
		}
	}
	if err := ip.packable(sp); err != nil {
		return 0, err
	}
	ne := binary.NativeEndian
	b, rawAt := ip.startRaw(ip.recordBuffer(), sp, g, t)
	b = ne.AppendUint64(b, c.ip)
	switch part {
	case wholeCall:
		for i := range c.fn.Args() {
			b = ne.AppendUint64(b, c.args[i])
		}
		b = appendReturnFields(b, c.fn, c.retIP, c.ptr, c.hdr, c.stat)
	case callEntry:
		b = appendShortEntryFields(b, c.fn, c.args[:], c.sp, c.retIP)
	case callReturn:
		b = appendReturnFields(b, c.fn, c.retIP, c.ptr, c.hdr, c.stat)
	}
	b = finishRaw(b, rawAt)
	*sp.count++
	return len(b) - 8, ip.commitCall(b)
}

// appendShortEntryFields appends a short entry's fields after its
// __probe_ip: the arguments, sp and the return address (s0).
func appendShortEntryFields(b []byte, fn shim.Func, args []uint64, sp, s0 uint64) []byte {
	ne := binary.NativeEndian
	for i := range fn.Args() {
		b = ne.AppendUint64(b, args[i])
	}
	b = ne.AppendUint64(b, sp)
	return ne.AppendUint64(b, s0)
}

// appendReturnFields appends a return's fields after its __probe_func
// (returnFields): the return address, the pointer, the chunk header and
// posix_memalign's status.
func appendReturnFields(b []byte, fn shim.Func, retIP, ptr, hdr, stat uint64) []byte {
	ne := binary.NativeEndian
	b = ne.AppendUint64(b, retIP)
	b = ne.AppendUint64(b, ptr)
	b = ne.AppendUint64(b, hdr)
	if fn.Status() {
		b = ne.AppendUint32(b, uint32(stat))
	}
	return b
}

// shimSampleMax bounds a shim record's sample without a stack: the
// header (8), IDENTIFIER, TID, TIME (24), the RAW size and common fields
// (12), and at most ip, three arguments, sp, bp, MaxWords words and the
// return's five fields, padded.
const shimSampleMax = 8 + 24 + 12 + 8*(6+shim.MaxWords+5) + 8

// owner is the thread a shim record comes from.
type owner struct{ pid, tid uint32 }

// writeShim writes one shim record as a sample (two for a sampled entry);
// short: an entry written without its top words (shortEntry).
func (ip *inproc) writeShim(g owner, rec *shim.Record, short bool) (int, error) {
	ip.seen(rec.Time, rec.Time)
	var sp *spec
	switch rec.Kind {
	case shim.KindEntry:
		sp = ip.entry[rec.Func]
		if short {
			sp = ip.short[rec.Func]
		}
	case shim.KindReturn:
		sp = ip.ret[rec.Func]
	case shim.KindFree:
		sp = ip.entry[shim.FuncFree]
	}
	if sp == nil {
		return 0, fmt.Errorf("%w: record of kind %d for function %v", shim.ErrCorrupt, rec.Kind, rec.Func)
	}
	if rec.Kind == shim.KindFree {
		ip.packing.vals = append(ip.packing.vals[:0], rec.Ptr())
		if n, ok, err := ip.packValues(sp, g, rec.Time, ip.packing.vals, false); ok {
			return n, err
		}
	}
	if err := ip.packable(sp); err != nil {
		return 0, err
	}
	if rec.Flags&(shim.FlagStackBig|shim.FlagStackSmall) == 0 {
		// Packed from its values, not built and read back (a sample
		// with a stack is built: its stack sample repeats its bytes).
		if n, ok, err := ip.packRecord(sp, g, rec, short); ok {
			return n, err
		}
	}
	ne := binary.NativeEndian
	b, rawAt := ip.startRaw(ip.recordBuffer(), sp, g, rec.Time)
	switch rec.Kind {
	case shim.KindEntry:
		b = ne.AppendUint64(b, rec.IP())
		w, _ := rec.Words(ip.words)
		if short {
			args := [3]uint64{rec.Arg(0), rec.Arg(1), rec.Arg(2)}
			b = appendShortEntryFields(b, rec.Func, args[:], rec.SP(), ne.Uint64(w))
			break
		}
		for i := range rec.Func.Args() {
			b = ne.AppendUint64(b, rec.Arg(i))
		}
		if rec.Func != shim.FuncFree {
			b = ne.AppendUint64(b, rec.SP())
			b = ne.AppendUint64(b, rec.BP())
			b = append(b, w...)
		}
	case shim.KindReturn:
		b = ne.AppendUint64(b, rec.IP())
		b = appendReturnFields(b, rec.Func, rec.RetIP(), rec.Ptr(), rec.Hdr(), rec.Status())
	case shim.KindFree:
		b = ne.AppendUint64(b, rec.Ptr())
	}
	b = finishRaw(b, rawAt)
	*sp.count++
	if err := ip.commitCall(b); err != nil {
		return 0, err
	}
	n := len(b) - 8
	b = b[8:] // the body, still where it was built until the next write
	if rec.Kind == shim.KindEntry && rec.Flags&(shim.FlagStackBig|shim.FlagStackSmall) != 0 {
		st := ip.big[rec.Func]
		if rec.Flags&shim.FlagStackSmall != 0 {
			st = ip.small[rec.Func]
		}
		regs, stack, ok := rec.Stack(ip.words)
		if st != nil && ok {
			raw := b[sampleHeadBytes:] // the entry's raw part, size included
			b2 := ip.sampleHead(ip.stackBuffer(), st, g, rec.Time)
			b2 = ne.AppendUint64(b2, 0) // CALLCHAIN: no kernel part, user part excluded
			b2 = append(b2, raw...)     // copied before anything else is written
			b2 = appendRegs(b2, regs)
			lo := len(b2) + 8
			b2 = appendStackUser(b2, stack)
			dyn := int(ne.Uint64(b2[len(b2)-8:]))
			*st.count++
			// The copy starts at the stack pointer, REGS_USER's SP.
			top := ne.Uint64(regs[16:]) + uint64(dyn)
			m := len(b2) // b2 is writeStack's once given
			if err := ip.writeStack(b2, lo, lo+dyn, top); err != nil {
				return n, err
			}
			n += m
		}
	}
	return n, nil
}

// sampleHeadBytes is the fixed part of shimSampleType: IDENTIFIER, TID,
// TIME.
const sampleHeadBytes = 24

func (ip *inproc) sampleHead(b []byte, sp *spec, g owner, t uint64) []byte {
	ne := binary.NativeEndian
	b = ne.AppendUint64(b, sp.synthID)
	b = ne.AppendUint32(b, g.pid)
	b = ne.AppendUint32(b, g.tid)
	return ne.AppendUint64(b, t)
}

// startRaw begins a sample of sp: the head, then the RAW part's size (filled
// in by finishRaw, from rawAt) and the tracepoint's common fields.
func (ip *inproc) startRaw(b []byte, sp *spec, g owner, t uint64) ([]byte, int) {
	b = ip.sampleHead(b, sp, g, t)
	rawAt := len(b)
	b = binary.NativeEndian.AppendUint32(b, 0)
	return appendCommon(b, sp, g.tid), rawAt
}

// appendCommon appends a tracepoint's common fields: type, flags,
// preempt count, pid (the thread, as the kernel writes it).
func appendCommon(b []byte, sp *spec, tid uint32) []byte {
	ne := binary.NativeEndian
	b = ne.AppendUint16(b, uint16(sp.attr.Config))
	b = append(b, 0, 0)
	return ne.AppendUint32(b, tid)
}

// finishRaw pads the RAW part (u32 size, then the payload) to 8 bytes as
// the kernel does and fills in its size.
func finishRaw(b []byte, at int) []byte {
	for (len(b)-at)%8 != 0 {
		b = append(b, 0)
	}
	binary.NativeEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// appendRegs writes REGS_USER for userRegsMask from the shim's fl_regs
// (bx, bp, sp, ip, r12..r15); registers it does not save read as zero.
func appendRegs(b []byte, regs []byte) []byte {
	ne := binary.NativeEndian
	b = ne.AppendUint64(b, 2) // PERF_SAMPLE_REGS_ABI_64
	val := func(i int) uint64 { return ne.Uint64(regs[8*i:]) }
	for bit := 0; bit < 64; bit++ {
		if userRegsMask&(1<<bit) == 0 {
			continue
		}
		var v uint64
		switch bit {
		case 1: // BX
			v = val(0)
		case 6: // BP
			v = val(1)
		case 7: // SP
			v = val(2)
		case 8: // IP
			v = val(3)
		case 20, 21, 22, 23: // R12..R15
			v = val(4 + bit - 20)
		}
		b = ne.AppendUint64(b, v)
	}
	return b
}

// shimWait bounds how long a thread of the program waits for room in its
// ring: past it the recorder is taken for dead or stuck, and the program
// runs on unrecorded (Result.Abandoned says from when).
const shimWait = 10 * time.Second

// The waker's tick: how long it sleeps without a wake from the program
// while the drains find records, and once they have found none for
// idleAfter. A program that stops allocating (a server between requests,
// a test suite between tests) costs record a wake every idleTick, not
// every busyTick (docs/performance.md has what that saves). A program
// that starts (its loader, then its first calls) is drained every
// busyTick from the start.
const (
	busyTick  = 5 * time.Millisecond
	idleTick  = 50 * time.Millisecond
	idleAfter = 100 * time.Millisecond
)

// wakeups returns a channel that receives when a thread of the program
// wakes the recorder (its ring is half full or it waits for room), and at
// least every busyTick (every idleTick once no drain has written anything
// for idleAfter: ip.busyAt), and the function that stops it: the waker
// reads the region, so it must be stopped before the region is unmapped.
//
// While the program allocates, the waker sleeps in raw system calls
// (Region.WaitWakeHeld) on a thread of its own, with a P of its own
// (spareProc). A sleep the scheduler sees makes sysmon take the waker's
// P after 20 µs, and a P so taken while the others are busy (the drain,
// the compressors) keeps sysmon waking every 20 µs, which costs a busy
// recording its time (docs/performance.md). Idle, it sleeps as the
// scheduler sees: its P then has nothing to do and sysmon backs off, and
// a stop of the world need not wait idleTick for it.
func (ip *inproc) wakeups() (<-chan struct{}, func()) {
	kick := make(chan struct{}, 1)
	stop, done := make(chan struct{}), make(chan struct{})
	word := ip.region.WakeWord()
	ip.busyAt.Store(time.Now().UnixNano())
	release := spareProc()
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		// seen is the wake count acted on: a wake that comes between
		// two waits changes the word before the next wait starts, which
		// then returns at once instead of sleeping through it.
		seen := atomic.LoadUint32(word)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if time.Now().UnixNano()-ip.busyAt.Load() > int64(idleAfter) {
				ip.region.WaitWake(seen, int64(idleTick))
			} else {
				// A signal ends a raw sleep early (SA_RESTART does not
				// restart a futex wait with a timeout): sleep again
				// for what is left, unless the word moved.
				end := time.Now().Add(busyTick)
				for left := busyTick; left > 0 && atomic.LoadUint32(word) == seen; left = time.Until(end) {
					ip.region.WaitWakeHeld(seen, int64(left))
				}
			}
			seen = atomic.LoadUint32(word)
			select {
			case kick <- struct{}{}:
			default:
			}
		}
	}()
	return kick, func() {
		close(stop)
		ip.region.Wake() // not a wait of up to 5 ms for its end
		<-done
		release()
	}
}

// procs counts the Ps lent to wakers (spareProc) over GOMAXPROCS as it
// was before the first.
var procs struct {
	sync.Mutex
	lent, base int
}

// spareProc raises GOMAXPROCS by one for a waker, which holds its P while
// it sleeps, and returns the function that gives it back.
func spareProc() func() {
	procs.Lock()
	defer procs.Unlock()
	if procs.lent == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.lent++
	runtime.GOMAXPROCS(procs.base + procs.lent)
	return func() {
		procs.Lock()
		defer procs.Unlock()
		procs.lent--
		runtime.GOMAXPROCS(procs.base + procs.lent)
	}
}

// writeUnrecorded writes the calls the shim could not record as
// LOST_SAMPLES of the malloc entry event (the shim counts them, not by
// function): those after a thread gave up waiting, stamped when the first
// did (or at the end), so analyze reports them as lost from then on, and
// those a signal handler made while the shim was recording a call of its
// thread, stamped at the end.
func (ip *inproc) writeUnrecorded() error {
	s := ip.s
	t := s.lastT
	if s.res.Abandoned {
		t = s.res.AbandonedAt
	}
	if err := ip.writeLostCalls(s.res.Shim.Unrecorded, t); err != nil {
		return err
	}
	return ip.writeLostCalls(s.res.Shim.Interrupted, s.lastT)
}

// writeLostCalls writes n unrecorded calls as one LOST_SAMPLES record
// stamped t.
func (ip *inproc) writeLostCalls(n, t uint64) error {
	s := ip.s
	if n == 0 {
		return nil
	}
	sp := ip.entry[shim.FuncMalloc]
	// u64 lost, then the sample_id trailer of shimSampleType: TID, TIME,
	// IDENTIFIER.
	var b [8 + 24]byte
	ne := binary.NativeEndian
	ne.PutUint64(b[0:], n)
	ne.PutUint64(b[16:], t)
	ne.PutUint64(b[24:], sp.synthID)
	s.lost[sp] += n
	return s.w.WriteRecordParts(uint32(perfdata.RecordLostSamples), 0, b[:])
}

// appendStackUser appends a sample's STACK_USER part: size, the bytes
// (padded to 8), dyn_size; the record's u16 size bounds the copy.
func appendStackUser(b, stack []byte) []byte {
	ne := binary.NativeEndian
	room := 0xffff - 8 - len(b) - 16
	stack = stack[:min(len(stack), room&^7)]
	size := (len(stack) + 7) &^ 7
	b = ne.AppendUint64(b, uint64(size))
	b = append(b, stack...)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return ne.AppendUint64(b, uint64(len(stack)))
}
