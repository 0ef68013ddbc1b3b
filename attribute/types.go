package attribute

import (
	"strings"

	"github.com/faultline/faultline/perfdata/schema"
)

// StackID names an interned call stack. The caller owns the table; the
// tracker only carries the ids through. 0 means "no stack".
type StackID uint32

// AllocKind is the allocator function an allocation came from; the
// recording's schema defines it, with the entry points of each kind.
type AllocKind = schema.AllocKind

// Allocator functions the tracker understands (schema.AllocKind).
const (
	KindMalloc       = schema.KindMalloc
	KindCalloc       = schema.KindCalloc
	KindRealloc      = schema.KindRealloc
	KindMemalign     = schema.KindMemalign
	KindReallocArray = schema.KindReallocArray
	KindMmap         = schema.KindMmap
	numKinds         = KindMmap + 1
)

// Flags describe an allocation; they become the profile's `flag` labels.
type Flags uint8

// The allocation flags.
const (
	// FlagFast: the requested size is at most Config.FastMax (a fastbin-sized request).
	FlagFast Flags = 1 << iota
	// FlagMmap: glibc served the chunk with its own mmap.
	FlagMmap
	// FlagZero: the memory was zeroed after allocation (calloc, or memset first).
	FlagZero
)

// Names returns the flags' label values in a fixed order.
func (f Flags) Names() []string {
	var out []string
	if f&FlagFast != 0 {
		out = append(out, "fast")
	}
	if f&FlagMmap != 0 {
		out = append(out, "mmap")
	}
	if f&FlagZero != 0 {
		out = append(out, "zero")
	}
	return out
}

func (f Flags) String() string {
	if f == 0 {
		return "-"
	}
	return strings.Join(f.Names(), ",")
}

// Access is how a fault touched memory, where the event says so.
type Access uint8

// Access kinds; x86 page_fault_user error_code bit 0x2 is write, 0x10 fetch.
const (
	AccessUnknown Access = iota
	AccessRead
	AccessWrite
	AccessExec
)

var accessNames = [...]string{"", "read", "write", "exec"}

func (a Access) String() string { return accessNames[a] }

// AccessFromX86ErrorCode decodes exceptions:page_fault_user's error_code.
func AccessFromX86ErrorCode(code uint64) Access {
	switch {
	case code&0x10 != 0:
		return AccessExec
	case code&0x2 != 0:
		return AccessWrite
	default:
		return AccessRead
	}
}

// ClassKind says what an unattributed fault touched.
type ClassKind uint8

// Classes of unattributed faults, judged from the process's maps at the time.
const (
	ClassUnknown ClassKind = iota // no mapping known for the address
	ClassStack                    // [stack]
	ClassHeap                     // [heap] but no live allocation there
	ClassAnon                     // other anonymous memory
	ClassFile                     // a file-backed page (code, data, relocations)
)

// Class is the region an unattributed fault touched. Name is the file's base
// name for ClassFile.
type Class struct {
	Kind ClassKind
	Name string
}

// String renders the class as the profile shows it: "[stack]", "[heap]",
// "[anon]", "[file] libc.so.6", "[vdso]", "[unknown]".
func (c Class) String() string {
	switch c.Kind {
	case ClassStack:
		return "[stack]"
	case ClassHeap:
		return "[heap]"
	case ClassAnon:
		return "[anon]"
	case ClassFile:
		if strings.HasPrefix(c.Name, "[") { // [vdso], [uprobes], [vvar]: not files
			return c.Name
		}
		return "[file] " + c.Name
	}
	return "[unknown]"
}

// Regions answers what mapping an address lay in at the current time of the
// stream. The tracker asks only for faults no allocation explains.
type Regions interface {
	Region(pid uint32, addr uint64) Class
}

// Entry is an allocator's entry probe hit.
type Entry struct {
	Pid, Tid  uint32
	Time      uint64
	Kind      AllocKind
	Size      uint64 // requested bytes (nmemb*size for calloc)
	OldPtr    uint64 // realloc's old pointer
	Stack     StackID
	CallerRet uint64 // return address into the caller (top of stack at entry); 0 if unknown
	// Leaf is the exact leaf of a call without a stack when its entry
	// told it (the first caller outside the allocator's wrappers); 0:
	// the return's Leaf is used.
	Leaf StackID
}

// Return is an allocator's return probe hit.
type Return struct {
	Pid, Tid uint32
	Time     uint64
	Kind     AllocKind
	Ptr      uint64
	RetIP    uint64 // __probe_ret_ip: where the allocator returns to; 0 if unknown
	Hdr      uint64 // chunk header (the size word at ptr-8) when HasHdr
	HasHdr   bool
	// Leaf is the one-frame stack of RetIP: the allocation's site when its
	// entry came without a stack (0: none).
	Leaf StackID
}

// Free is a free probe hit.
type Free struct {
	Pid, Tid uint32
	Time     uint64
	Ptr      uint64
}

// Fault is one page fault.
type Fault struct {
	Pid, Tid uint32
	Time     uint64
	Addr     uint64
	Access   Access
	Stack    StackID
	// PageSize is the size of the page the fault mapped when the event
	// says it (minor-faults with PERF_SAMPLE_DATA_PAGE_SIZE): above
	// PageSize a huge page, all of which the fault made resident. 0: not
	// known.
	PageSize uint64
	// InMemset reports that the fault's leaf frame is in the memset family
	// (memset, __memset_*, bzero, __bzero*): it decides the zero flag.
	InMemset bool

	// Set by the tracker before it hands the fault to the Sink.
	Class    Class // what was touched, when no allocation explains the fault
	InFlight bool  // taken inside the allocator before its return
	// InAllocator: an in-flight fault on the allocator's own heap or arena
	// memory outside the new chunk (a new top, heap_info, tcache setup),
	// charged to the call it served.
	InAllocator bool
	Approx      bool // attributed by time window, not by address
	// Refault: the page had been resident and was released since (set by
	// the resident tracking, Tracker.OnCredit or the Sink's caller).
	Refault bool
}

// Allocation is one allocation the tracker has seen.
type Allocation struct {
	Pid, Tid uint32
	Time     uint64 // entry time
	Kind     AllocKind
	Size     uint64
	Ptr      uint64
	Site     StackID
	Flags    Flags
	Faults   uint64 // faults attributed to it so far
	// Inherited marks the copy a forked child holds of its parent's
	// allocation: its faults count against the parent's site but it is not a
	// new allocation.
	Inherited bool

	returned bool    // the return probe arrived (address known)
	decided  bool    // flags are final
	counted  bool    // handed to Sink.Allocation
	pending  []Fault // faults waiting for the flags to be final
}

// Sink receives the tracker's results in stream order. The *Fault and
// *Allocation are valid only during the call (the tracker recycles them):
// copy what you keep.
type Sink interface {
	// Allocation is called once per allocation (not for inherited copies),
	// when its flags are final.
	Allocation(a *Allocation)
	// Fault is called once per fault; a is nil when no allocation explains
	// it (f.Class says what it touched). Called after a's flags are final.
	Fault(f *Fault, a *Allocation)
}
