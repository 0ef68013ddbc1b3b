package analyze

import (
	"fmt"
	"strings"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
)

// Role is what an event means to the analysis.
type Role uint8

// Event roles.
const (
	RoleNone        Role = iota // not used (decoded, counted, otherwise ignored)
	RoleAllocEntry              // an allocator's entry probe: size (and old pointer for realloc)
	RoleAllocReturn             // an allocator's return probe: the pointer
	RoleFree                    // free's entry probe: the pointer
	RoleFault                   // a page fault: page-faults:u, minor/major-faults, exceptions:page_fault_user
	// RoleStack: a second instance of an entry probe (or fault event) that
	// carries stacks for some of its hits; each sample lends its stack to
	// the range event's sample of the same hit.
	RoleStack
	// RoleAllocCall: one sample for a whole call, entry and return, at
	// the return's time (schema.CallSuffix): the entry's fields and the
	// return's.
	RoleAllocCall
	// RoleSysEnter and RoleSysExit: a memory-map call's syscall
	// tracepoint (mmap, munmap, mremap, madvise, brk).
	RoleSysEnter
	RoleSysExit
	// RoleRSS: faultline record's faultline:rss (schema.RSSEvent), the
	// program's own peak RSS.
	RoleRSS
	// RoleSnapshot: faultline record's faultline:resident
	// (schema.SnapshotEvent), a process's resident pages from its page
	// tables.
	RoleSnapshot
)

var roleNames = [...]string{"ignored", "alloc-entry", "alloc-return", "free", "fault", "stack", "alloc-call", "map-enter", "map-exit", "rss", "snapshot"}

func (r Role) String() string { return roleNames[r] }

// eventInfo is what the analysis resolved once per event: its role and the
// raw fields it reads, so the per-sample path does no name lookups.
type eventInfo struct {
	ev   *perfdata.Event
	role Role
	kind attribute.AllocKind

	size, nmemb, oldPtr *perfdata.TraceField // entry
	// zeroFlag: jemalloc's mallocx flags argument, whose MALLOCX_ZERO
	// bit asks for zeroed memory (as calloc does).
	zeroFlag           *perfdata.TraceField
	ptr, retIP, hdr    *perfdata.TraceField // return (ptr also for free)
	address, errorCode *perfdata.TraceField // tracepoint faults
	faultFromAddr      bool                 // software fault event: sample ADDR (needs -d)
	// guess marks a tracepoint whose format the recording lacks (cut
	// before its TRACING_DATA feature): its role is inferred from its
	// first sample (guess.go).
	guess bool

	// Stack events (stacks.go): stackFor is the index of the range event
	// whose hits this event's samples carry stacks for (RoleStack only);
	// twin marks a range event that has such an event; sampled marks a
	// stack event that takes 1 in SamplePeriod hits.
	stackFor int
	twin     bool
	sampled  bool
	// statusReturn: posix_memalign's return value is a status, not the
	// pointer (that goes to *memptr, which a return probe cannot read).
	statusReturn bool

	stackTop
	mapCallFields
}

// stackTop are the top of the stack an entry probe fetched
// (schema.TopStackSP, ...; nil without): probeIP is the probed function's
// address.
type stackTop struct {
	probeIP, topSP, topBP *perfdata.TraceField
	topWords              []*perfdata.TraceField
}

// mapCallFields describe a memory-map call's event (memmap.go): which call,
// entry or exit, and the arguments it reads (the exit: ret only).
type mapCallFields struct {
	sys     sysCall
	sysExit bool
	sysArgs [maxSyscallArgs]*perfdata.TraceField
	// snap: faultline:resident's fields (snapshot.go).
	snap *snapFields
}

// topStackFields resolves an entry event's top-of-stack fields
// (schema.TopStackSP, ...): sp and the words s0, s1, … present in a row
// (none without sp); probeIP is the probed function's address.
func (in *eventInfo) topStackFields() {
	in.topSP = field(in.ev, schema.TopStackSP)
	in.probeIP = field(in.ev, "__probe_ip")
	if in.topSP == nil || in.probeIP == nil {
		in.topSP = nil
		return
	}
	in.topBP = field(in.ev, schema.TopStackBP)
	for i := 0; i < schema.MaxTopWords; i++ {
		f := field(in.ev, schema.TopStackWord(i))
		if f == nil {
			break
		}
		in.topWords = append(in.topWords, f)
	}
	if len(in.topWords) == 0 {
		in.topSP = nil
	}
}

// allocNames maps allocator function names (as probed) to their kind.
var allocNames = map[string]attribute.AllocKind{
	"malloc": attribute.KindMalloc, "__libc_malloc": attribute.KindMalloc, "__malloc": attribute.KindMalloc,
	"calloc": attribute.KindCalloc, "__libc_calloc": attribute.KindCalloc, "__calloc": attribute.KindCalloc,
	"realloc": attribute.KindRealloc, "__libc_realloc": attribute.KindRealloc, "__realloc": attribute.KindRealloc,
	"reallocarray": attribute.KindReallocArray, "__libc_reallocarray": attribute.KindReallocArray,
	"memalign": attribute.KindMemalign, "__libc_memalign": attribute.KindMemalign,
	"aligned_alloc": attribute.KindMemalign, "posix_memalign": attribute.KindMemalign, "__posix_memalign": attribute.KindMemalign,
	"valloc": attribute.KindMemalign, "__libc_valloc": attribute.KindMemalign,
	"pvalloc": attribute.KindMemalign, "__libc_pvalloc": attribute.KindMemalign,
}

var freeNames = map[string]bool{"free": true, "__libc_free": true, "cfree": true, "__free": true}

// Every family's entry points are recorded under the event names of
// schema.EntryPoints.
func init() {
	for i := range schema.EntryPoints {
		e := &schema.EntryPoints[i]
		if e.Role == schema.EntryFree {
			freeNames[e.Event] = true
		} else {
			allocNames[e.Event] = e.Kind
		}
	}
}

// probeName returns the function part of a probe event's name, and
// whether it is a return probe ("probe_libc:malloc__return" → "malloc",
// true) or a whole-call event ("faultline:malloc__call").
func probeName(ev *perfdata.Event) (fn string, ret, call bool) {
	name := ev.Name
	if ev.Format != nil && ev.Format.Name != "" {
		name = ev.Format.Name
	} else if i := strings.LastIndexByte(name, ':'); i >= 0 {
		name = name[i+1:]
	}
	if fn, call = strings.CutSuffix(name, schema.CallSuffix); call {
		return fn, false, true
	}
	fn, ret = strings.CutSuffix(name, schema.ReturnSuffix)
	return fn, ret, false
}

// baseFunc finds the allocator a probe's function part names: the name
// itself, or the name with "_suffix" parts dropped from the right, as perf
// probe users name variants ("malloc_hdr", "malloc_1").
func baseFunc(fn string) string {
	for {
		if _, ok := allocNames[fn]; ok || freeNames[fn] {
			return fn
		}
		i := strings.LastIndexByte(fn, '_')
		if i <= 0 || strings.Trim(fn[:i], "_") == "" {
			return fn
		}
		fn = fn[:i]
	}
}

// field returns the first of names the event's format has.
func field(ev *perfdata.Event, names ...string) *perfdata.TraceField {
	if ev.Format == nil {
		return nil
	}
	for _, n := range names {
		if f := ev.Format.Field(n); f != nil {
			return f
		}
	}
	return nil
}

// classify decides an event's role. override maps event names to a role
// spelled as on the command line ("malloc", "malloc-return", "calloc", ...,
// "free", "fault", "ignore").
func classify(ev *perfdata.Event, override map[string]string) (*eventInfo, error) {
	in := &eventInfo{ev: ev}
	fn, ret, call := probeName(ev)
	fn = baseFunc(fn)
	if spec, ok := override[ev.Name]; ok {
		switch {
		case spec == "ignore":
			return in, nil
		case spec == "fault":
			return faultInfo(in), nil
		case spec == "free":
			fn, ret = "free", false
		default:
			base, isRet := strings.CutSuffix(spec, "-return")
			if _, ok := allocNames[base]; !ok {
				return nil, fmt.Errorf("--event %s=%s: unknown role %q (want malloc, calloc, realloc, reallocarray, memalign, their -return forms, free, fault or ignore)", ev.Name, spec, spec)
			}
			fn, ret = base, isRet
		}
	}
	switch {
	case ev.Attr.Type == perfdata.TypeSoftware && perfdata.SoftwareEvent(ev.Attr.Config).IsPageFault():
		return faultInfo(in), nil
	case ev.Format != nil && ev.Format.System == "exceptions" && ev.Format.Name == "page_fault_user":
		return faultInfo(in), nil
	case syscallInfo(in), rssInfo(in), snapshotInfo(in):
		return in, nil
	}
	if kind, ok := allocNames[fn]; ok {
		in.kind = kind
		if ret {
			in.role = RoleAllocReturn
			in.ptr = field(ev, "ptr", "ret", "arg1")
			in.retIP = field(ev, "__probe_ret_ip")
			in.hdr = field(ev, "hdr")
			// A return probe sees posix_memalign's status, whatever it
			// names it; faultline's in-process events have the pointer
			// stored (ptr) beside the status (ret).
			inproc := field(ev, "ptr") != nil && field(ev, "ret") != nil
			in.statusReturn = (fn == "posix_memalign" || fn == "__posix_memalign") && !inproc
			if in.ptr == nil {
				return nil, fmt.Errorf("event %s: a return probe needs the pointer as field ptr (perf probe -x LIBC '%s%%return ptr=$retval')", ev.Name, fn)
			}
			return in, nil
		}
		in.role = RoleAllocEntry
		if call {
			in.role = RoleAllocCall
			in.ptr = field(ev, "ptr")
			in.retIP = field(ev, "__probe_ret_ip")
			in.hdr = field(ev, "hdr")
			if in.ptr == nil {
				return nil, fmt.Errorf("event %s: a whole-call event needs the pointer as field ptr", ev.Name)
			}
		}
		switch kind {
		case attribute.KindCalloc:
			in.nmemb = field(ev, "nmemb", "n", "arg1")
			in.size = field(ev, "size", "bytes", "arg2")
		case attribute.KindRealloc:
			in.oldPtr = field(ev, "oldptr", "ptr", "arg1")
			in.size = field(ev, "size", "bytes", "arg2")
		case attribute.KindReallocArray: // (oldptr, nmemb, size)
			in.oldPtr = field(ev, "oldptr", "ptr", "arg1")
			in.nmemb = field(ev, "nmemb", "n", "arg2")
			in.size = field(ev, "size", "bytes", "arg3")
		case attribute.KindMemalign:
			if fn == "posix_memalign" || fn == "__posix_memalign" {
				in.size = field(ev, "size", "bytes", "arg3")
			} else if fn == "valloc" || fn == "__libc_valloc" || fn == "pvalloc" || fn == "__libc_pvalloc" {
				in.size = field(ev, "size", "bytes", "arg1")
			} else {
				in.size = field(ev, "size", "bytes", "arg2")
			}
		default:
			in.size = field(ev, "size", "bytes", "arg1")
			if fn == "mallocx" || fn == "je_mallocx" {
				in.zeroFlag = field(ev, "flags", "arg2")
			}
		}
		in.topStackFields()
		if in.size == nil {
			return nil, fmt.Errorf("event %s: an entry probe needs the requested size as field size (perf probe -x LIBC '%s size=%%di:u64')", ev.Name, fn)
		}
		return in, nil
	}
	if ev.Format == nil && ev.Attr.Type == perfdata.TypeTracepoint {
		in.guess = true
		return in, nil
	}
	if freeNames[fn] && !ret {
		in.role = RoleFree
		in.ptr = field(ev, "ptr", "mem", "arg1")
		if in.ptr == nil {
			return nil, fmt.Errorf("event %s: a free probe needs the pointer as field ptr (perf probe -x LIBC 'free ptr=%%di:u64')", ev.Name)
		}
	}
	return in, nil
}

func faultInfo(in *eventInfo) *eventInfo {
	in.role = RoleFault
	in.address = field(in.ev, "address")
	in.errorCode = field(in.ev, "error_code")
	in.faultFromAddr = in.address == nil
	return in
}

// stackBits are the sample_type bits that give a sample a stack.
const stackBits = perfdata.SampleStackUser | perfdata.SampleCallchain

func hasStacks(ev *perfdata.Event) bool { return ev.Attr.SampleType&stackBits != 0 }

// sameEvent reports whether two attrs open the same event source (one
// tracepoint id, one software counter).
func sameEvent(a, b *perfdata.Event) bool {
	return a.Attr.Type == b.Attr.Type && a.Attr.Config == b.Attr.Config
}

// pairStackEvents marks the stack events among infos and their range
// twins (stacks.go says what they are and how their samples are joined).
// Idempotent: pipe mode calls it again as attrs arrive.
func pairStackEvents(infos []*eventInfo) {
	for i, in := range infos {
		if in.role != RoleAllocEntry && in.role != RoleFault || !hasStacks(in.ev) {
			continue
		}
		for j, r := range infos {
			if j == i || r.role != in.role || hasStacks(r.ev) || !sameEvent(in.ev, r.ev) {
				continue
			}
			in.role, in.stackFor, r.twin = RoleStack, j, true
			in.sampled = in.ev.Attr.SamplePeriod > 1 && in.ev.Attr.Flags&perfdata.AttrFreq == 0
			break
		}
	}
}
