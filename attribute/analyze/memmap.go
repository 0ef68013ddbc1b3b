package analyze

import (
	"sort"
	"strings"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
)

// The memory-map calls: the syscall tracepoints syscalls:sys_enter_NAME
// and sys_exit_NAME (include/trace/events/syscalls.h; the fields are the
// syscall's arguments as named in its SYSCALL_DEFINE, and ret) of mmap,
// munmap, mremap, madvise and brk, recorded by faultline record or by
// perf record -e 'syscalls:sys_*_mmap' ….
//
// An anonymous mmap (MAP_ANONYMOUS) the program made becomes a site of its
// own: a fault no allocation explains that lands in it goes to the mmap
// call's stack (via=mmap), so Python's arenas, JIT and runtime heaps and
// custom pools get names instead of [anon]. A mapping made inside an
// allocator call needs nothing: the tracker explains the faults in it
// (the allocation, or inside=allocator), so it never reaches the lookup.
// The releases (munmap, madvise DONTNEED/FREE/REMOVE, brk shrinking,
// mremap moving or shrinking) are fed to the resident tracker.
//
// Where the calls are recorded, the kernel's own records of anonymous
// mappings (MMAP2 with mmap_data, "//anon") show the mappings no recorded
// call made: the in-process method records the C library's wrappers, and
// the C library's own maps (thread stacks, malloc's chunks and arenas, the
// loader's) and raw system calls bypass them. The record has no stack to
// name a site by, so the faults in such a mapping are counted and stay
// unattributed, and the summary says how many: their releases are not
// seen either, unless a recorded call makes them.

// sysCall is which memory-map call an event traces.
type sysCall uint8

const (
	sysNone sysCall = iota
	sysMmap
	sysMunmap
	sysMremap
	sysMadvise
	sysBrk
)

var sysCalls = map[string]sysCall{"mmap": sysMmap, "munmap": sysMunmap, "mremap": sysMremap, "madvise": sysMadvise, "brk": sysBrk}

// Constants of the calls' arguments (include/uapi/asm-generic/mman*.h,
// x86-64 and arm64 alike).
const (
	mapAnonymous   = 0x20
	madvDontneed   = 4
	madvFree       = 8
	madvRemove     = 9
	madvCollapse   = 25
	mremapFixed    = 2
	maxSyscallArgs = 5
)

// syscallInfo classifies a syscalls:sys_enter_NAME or sys_exit_NAME event
// of a memory-map call, or returns false.
func syscallInfo(in *eventInfo) bool {
	ev := in.ev
	if ev.Format == nil || ev.Format.System != schema.SyscallSystem {
		return false
	}
	name, exit := strings.CutPrefix(ev.Format.Name, "sys_exit_")
	if !exit {
		var ok bool
		if name, ok = strings.CutPrefix(ev.Format.Name, "sys_enter_"); !ok {
			return false
		}
	}
	call := sysCalls[name]
	if call == sysNone {
		return false
	}
	in.sys, in.sysExit = call, exit
	if exit {
		in.role = RoleSysExit
		in.sysArgs[0] = field(ev, "ret")
		return in.sysArgs[0] != nil
	}
	in.role = RoleSysEnter
	var names []string
	switch call {
	case sysMmap:
		names = []string{"addr", "len", "flags", "fd"}
	case sysMunmap:
		names = []string{"addr", "len"}
	case sysMremap:
		names = []string{"addr", "old_len", "new_len", "flags", "new_addr"}
	case sysMadvise:
		names = []string{"start", "len_in", "behavior"}
	case sysBrk:
		names = []string{"brk"}
	}
	for i, n := range names {
		if in.sysArgs[i] = field(ev, n); in.sysArgs[i] == nil {
			in.role = RoleNone
			return true
		}
	}
	return true
}

// pendingCall is a call whose entry was seen and whose exit is awaited.
type pendingCall struct {
	call  sysCall
	args  [maxSyscallArgs]uint64
	stack attribute.StackID
	time  uint64
}

// mapping is (what is left of) an anonymous mapping the program made.
type mapping struct {
	start, end uint64
	site       *mapSite // shared by the parts a partial munmap leaves
}

// mapSite is one mmap call's allocation.
type mapSite struct {
	alloc   attribute.Allocation
	counted bool // handed to the builder as an allocation (at its first fault)
	kernel  bool // only the kernel's record showed it: its faults are counted, not attributed
}

// memMaps is the run's view of the memory-map calls.
type memMaps struct {
	pending map[uint32]*pendingCall // by tid
	maps    map[uint32][]*mapping   // by pid, sorted by start, disjoint
	brk     map[uint32]uint64       // by pid: the break its last brk call returned
	calls   uint64                  // calls seen (entries)
	mapped  uint64                  // faults explained by a program's own mapping
	// kernelMaps and kernelFaults: the mappings only the kernel's records
	// showed that took faults, and their faults.
	kernelMaps, kernelFaults uint64
	sysEvents                bool // the recording has memory-map call events
	// chunkHeaders: allocator returns carry glibc's chunk header, so an
	// allocation's FlagMmap is its IS_MMAPPED bit (freeCall).
	chunkHeaders bool
	// ran holds the processes that took a fault since their exec: the
	// kernel's records before it are of the exec's own mappings (the
	// program's .bss, the break), which no call makes with either method.
	ran map[uint32]bool
	// hwm and anon: the program's own peak RSS and peak anonymous RSS
	// (faultline:rss), bytes.
	hwm, anon int64
	pid       uint32 // the process they are of
}

func newMemMaps() *memMaps {
	return &memMaps{pending: map[uint32]*pendingCall{}, maps: map[uint32][]*mapping{}, brk: map[uint32]uint64{}, ran: map[uint32]bool{}}
}

// sysSample handles a memory-map call's sample.
func (ru *run) sysSample(in *eventInfo, smp *perfdata.Sample) {
	mm := ru.mm
	if !in.sysExit {
		mm.calls++
		var args [maxSyscallArgs]uint64
		for i, f := range in.sysArgs {
			if f != nil {
				args[i], _ = f.Uint64(smp.Raw)
			}
		}
		switch in.sys {
		case sysMunmap:
			ru.unmap(smp.Pid, args[0], args[0]+args[1], smp.Time)
			return
		case sysMadvise:
			switch args[2] {
			case madvDontneed, madvFree, madvRemove:
				ru.b.Res.Release(smp.Pid, args[0], args[0]+args[1], smp.Time)
			case madvCollapse:
				// Taken as done: faultline record's in-process method
				// writes only the calls that succeeded; with the
				// tracepoint a failed collapse is undone by the next
				// snapshot.
				ru.b.Res.Collapse(smp.Pid, args[0], args[0]+args[1], smp.Time, ru.ownerAt)
			}
			return
		}
		pc := mm.pending[smp.Tid]
		if pc == nil {
			pc = &pendingCall{}
			mm.pending[smp.Tid] = pc
		}
		*pc = pendingCall{call: in.sys, args: args, time: smp.Time}
		if in.sys == sysMmap && walks(in) {
			pc.stack = ru.stackOf(smp)
		}
		return
	}
	pc := mm.pending[smp.Tid]
	if pc == nil || pc.call != in.sys {
		return // the entry was before the recording, or lost
	}
	pc.call = sysNone
	ret, _ := in.sysArgs[0].Uint64(smp.Raw)
	if int64(ret) < 0 && int64(ret) > -4096 {
		return // failed: -errno
	}
	switch in.sys {
	case sysMmap:
		length := pageUp(pc.args[1])
		// A fixed mapping over older ones replaces them.
		ru.unmap(smp.Pid, ret, ret+length, smp.Time)
		if pc.args[2]&mapAnonymous != 0 {
			mm.insert(smp.Pid, &mapping{start: ret, end: ret + length, site: &mapSite{alloc: attribute.Allocation{
				Pid: smp.Pid, Tid: smp.Tid, Time: pc.time, Kind: attribute.KindMmap, Size: pc.args[1],
				Ptr: ret, Site: pc.stack, Flags: attribute.FlagMmap}}})
		}
	case sysMremap:
		old, oldLen, newLen := pc.args[0], pageUp(pc.args[1]), pageUp(pc.args[2])
		ru.b.Res.Move(smp.Pid, old, oldLen, ret, newLen, smp.Time)
		m := mm.find(smp.Pid, old)
		if m != nil && m.start == old && m.end == old+oldLen {
			mm.remove(smp.Pid, m)
			if ret != old {
				ru.unmap(smp.Pid, ret, ret+newLen, smp.Time)
			}
			m.start, m.end = ret, ret+newLen
			mm.insert(smp.Pid, m)
		}
	case sysBrk:
		if prev, ok := mm.brk[smp.Pid]; ok && ret < prev {
			ru.b.Res.Release(smp.Pid, pageUp(ret), pageUp(prev), smp.Time)
		}
		mm.brk[smp.Pid] = ret
	}
}

func pageUp(n uint64) uint64 { return (n + attribute.PageSize - 1) &^ (attribute.PageSize - 1) }

// unmap releases [start, end): its pages and the program's mappings in it
// (a mapping cut in part keeps its other part).
func (ru *run) unmap(pid uint32, start, end, t uint64) {
	ru.b.Res.Release(pid, start, end, t)
	mm := ru.mm
	ms := mm.maps[pid]
	out := ms[:0]
	var tail []*mapping
	for _, m := range ms {
		switch {
		case m.end <= start || m.start >= end:
			out = append(out, m)
		case m.start < start && m.end > end:
			// A hole in the middle: two mappings of one call.
			rest := *m
			rest.start = end
			m.end = start
			out = append(out, m)
			tail = append(tail, &rest)
		case m.start < start:
			m.end = start
			out = append(out, m)
		case m.end > end:
			m.start = end
			out = append(out, m)
		}
	}
	out = append(out, tail...)
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	mm.maps[pid] = out
}

func (mm *memMaps) insert(pid uint32, m *mapping) {
	ms := mm.maps[pid]
	i := sort.Search(len(ms), func(i int) bool { return ms[i].start >= m.start })
	ms = append(ms, nil)
	copy(ms[i+1:], ms[i:])
	ms[i] = m
	mm.maps[pid] = ms
}

func (mm *memMaps) remove(pid uint32, m *mapping) {
	ms := mm.maps[pid]
	for i := range ms {
		if ms[i] == m {
			mm.maps[pid] = append(ms[:i], ms[i+1:]...)
			return
		}
	}
}

// find returns the program's mapping that holds addr, or nil.
func (mm *memMaps) find(pid uint32, addr uint64) *mapping {
	ms := mm.maps[pid]
	i := sort.Search(len(ms), func(i int) bool { return ms[i].end > addr })
	if i < len(ms) && ms[i].start <= addr {
		return ms[i]
	}
	return nil
}

// kernelMap takes an anonymous mapping the kernel reported after the
// process began to run: the parts of it no known mapping covers are
// remembered as made by no recorded call (their faults counted), unless a
// recorded memory-map call on the thread is in flight (the tracepoints'
// sys_enter comes before the kernel's record, and that call's exit makes
// the mapping). A recorded call that returns later (the in-process
// method writes its call at the return) replaces them with its own, as
// any new mapping replaces what it covers. The kernel reports a mapping
// merged with its anonymous neighbours and again when mprotect changes a
// part of one: the parts known already are left as they are.
func (ru *run) kernelMap(r *perfdata.Mmap) {
	mm := ru.mm
	if !mm.sysEvents || r.Pid == perfdata.KernelPid || r.Len == 0 || !mm.ran[r.Pid] {
		return
	}
	if pc := mm.pending[r.Tid]; pc != nil && pc.call != sysNone {
		return
	}
	start, end := r.Addr, r.Addr+r.Len
	ms := mm.maps[r.Pid]
	i := sort.Search(len(ms), func(i int) bool { return ms[i].end > start })
	var gaps [][2]uint64
	s := start
	for _, m := range ms[i:] {
		if m.start >= end {
			break
		}
		if m.start > s {
			gaps = append(gaps, [2]uint64{s, m.start})
		}
		s = max(s, m.end)
	}
	if s < end {
		gaps = append(gaps, [2]uint64{s, end})
	}
	for _, g := range gaps {
		mm.insert(r.Pid, &mapping{start: g[0], end: g[1], site: &mapSite{kernel: true, alloc: attribute.Allocation{
			Pid: r.Pid, Tid: r.Tid, Time: r.Time, Kind: attribute.KindMmap, Size: g[1] - g[0],
			Ptr: g[0], Flags: attribute.FlagMmap}}})
	}
}

// freeCall ends an allocation at its free, and releases the pages of a chunk
// glibc's malloc mapped for itself (IS_MMAPPED in its header: the chunk
// starts at a page, 16 bytes before the pointer): free unmaps such a
// chunk at once (malloc/malloc.c munmap_chunk) with the C library's own
// call, which the in-process method's wrappers do not see. Where the
// memory-map calls are traced, the munmap that follows releases the same
// pages again. The release comes after the allocation has ended, so its
// untouched bytes are counted from its pages as they were.
func (ru *run) freeCall(f *attribute.Free) {
	var unmapTo uint64
	if ru.mm.chunkHeaders && f.Ptr >= 16 && (f.Ptr-16)%attribute.PageSize == 0 {
		if a := ru.tr.Live(f.Pid, f.Ptr); a != nil && a.Ptr == f.Ptr && a.Flags&attribute.FlagMmap != 0 && a.Kind != attribute.KindMmap {
			unmapTo = pageUp(f.Ptr + a.Size)
		}
	}
	ru.tr.Free(f)
	if unmapTo != 0 {
		ru.unmap(f.Pid, f.Ptr-16, unmapTo, f.Time)
	}
}

// exit forgets a process's mappings (exit, or exec replacing them).
func (mm *memMaps) exit(pid uint32) {
	delete(mm.maps, pid)
	delete(mm.brk, pid)
	delete(mm.ran, pid)
}

// rssInfo classifies faultline:rss.
func rssInfo(in *eventInfo) bool {
	ev := in.ev
	if ev.Format == nil || ev.Format.System != schema.System || ev.Format.Name != schema.RSSEvent {
		return false
	}
	in.sysArgs[0], in.sysArgs[1], in.sysArgs[2] = field(ev, "hwm"), field(ev, "anon_peak"), field(ev, "pid")
	if in.sysArgs[0] != nil && in.sysArgs[1] != nil {
		in.role = RoleRSS
	}
	return true
}

// rssSample keeps the largest peaks the recording states.
func (ru *run) rssSample(in *eventInfo, smp *perfdata.Sample) {
	hwm, _ := in.sysArgs[0].Uint64(smp.Raw)
	anon, _ := in.sysArgs[1].Uint64(smp.Raw)
	ru.mm.hwm, ru.mm.anon = max(ru.mm.hwm, int64(hwm)), max(ru.mm.anon, int64(anon))
	if pid, ok := in.sysArgs[2].Uint64(smp.Raw); ok {
		ru.mm.pid = uint32(pid)
	}
}
