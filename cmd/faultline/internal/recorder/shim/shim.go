// Package shim holds faultline's in-process allocator recorder: the shared
// object built from csrc (by build.sh, committed, embedded here) and the
// layout of the shared memory it writes (abi.h), mirrored as offsets.
//
// The recorder creates the region (NewRegion), preloads Object into the
// program with LD_PRELOAD and names the region in the environment (Env);
// each thread of the program then writes its allocator calls into a ring of
// its own, which the recorder drains (Region.Rings, Ring.Next).
package shim

import (
	_ "embed"
	"runtime"

	"github.com/faultline/faultline/perfdata/schema"
)

// Object is libfaultline-shim.so, built from csrc by build.sh: the shim
// for glibc's malloc and any allocator without entry points of its own.
//
//go:embed csrc/libfaultline-shim.so
var Object []byte

// The objects for the allocator families with entry points of their own
// (operator new and delete, mallocx, tc_new, mi_zalloc): each defines only
// its family's symbols, so a program of another family sees none of them.
var (
	//go:embed csrc/libfaultline-shim-jemalloc.so
	objectJemalloc []byte
	//go:embed csrc/libfaultline-shim-tcmalloc.so
	objectTcmalloc []byte
	//go:embed csrc/libfaultline-shim-mimalloc.so
	objectMimalloc []byte
)

// ObjectFor returns the shim object to preload into a program whose
// malloc is family f's, and its file name.
func ObjectFor(f schema.Family) (obj []byte, name string) {
	switch f {
	case schema.FamilyJemalloc:
		return objectJemalloc, "libfaultline-shim-jemalloc.so"
	case schema.FamilyTcmalloc:
		return objectTcmalloc, "libfaultline-shim-tcmalloc.so"
	case schema.FamilyMimalloc:
		return objectMimalloc, "libfaultline-shim-mimalloc.so"
	}
	return Object, "libfaultline-shim.so"
}

// HasFamilyObject reports whether f has a shim object of its own, which
// records its own entry points.
func HasFamilyObject(f schema.Family) bool {
	_, name := ObjectFor(f)
	return name != "libfaultline-shim.so"
}

// Supported reports whether the shim runs on this machine's architecture
// (its entry stubs are x86-64 assembly).
func Supported() bool { return runtime.GOARCH == "amd64" }

// Layout constants, as in abi.h.
const (
	Magic      = 0x31534c46
	Version    = 5
	CtrlBytes  = 16384
	MaxSlots   = 1024
	RingHeader = 4096
	MaxWords   = 16
	MaxStack   = 65528
	EnvName    = "FAULTLINE_SHM"
)

// fl_ctrl field offsets.
const (
	offMagic         = 0
	offVersion       = 4
	offNSlots        = 8
	offRingBytes     = 12
	offStackSize     = 16
	offStackEvery    = 20
	offStackMin      = 24
	offWords         = 32
	offGlibc         = 36
	offWake          = 40
	offSleeping      = 44
	offDetached      = 48
	offAbandoned     = 52
	offAbandonedTime = 56
	offWaitNs        = 64
	offUnrecorded    = 72
	offSlotsFull     = 80
	offSlotState     = 88
	offTSC           = 4184
	offTSCJumps      = 4188
	offTSCJumpTime   = 4192
	offMapCalls      = 4200
)

// fl_ring field offsets.
const (
	offHead        = 0
	offBusy        = 8
	offPid         = 12
	offTid         = 16
	offWaiting     = 20
	offNested      = 24
	offWaits       = 32
	offClockReads  = 40
	offInterrupted = 48
	offTail        = 64
	offTailSeq     = 72
)

// fl_ring.busy values (abi.h FL_BUSY_*).
const (
	busyNo     = 0
	busyRecord = 1
	busyCall   = 2
)

// Slot states.
const (
	slotFree    = 0
	slotClaimed = 1
)

// Record kinds (fl_rec.kind).
const (
	KindPad    = 0
	KindEntry  = 1
	KindReturn = 2
	KindFree   = 3
	// KindCall is a whole call, written at its return in place of an
	// entry with FlagShort and its return (abi.h, fl_call).
	KindCall = 4
	// KindSys is a memory-map call, written at its return (abi.h,
	// fl_sys); its Func is a Sys.
	KindSys = 5
)

// Record flags (fl_rec.flags).
const (
	FlagStackBig   = 1
	FlagStackSmall = 2
	// FlagShort: the entry carries one word (the return address), not
	// Options.Words: the call came from the program's own executable.
	FlagShort = 4
)

// Sizes of the record parts.
const (
	RecHeader  = 16 // fl_rec
	EntryFixed = 48 // fl_entry: ip, args[3], sp, bp
	RegsBytes  = 64 // fl_regs
	ReturnSize = 40 // fl_return
	FreeSize   = 16 // fl_free
	CallSize   = 64 // fl_call: fl_return's first four fields, entry time, args[2], sp
	SysSize    = 48 // fl_sys: args[5], ret
)

// Sys is a memory-map call (fl_rec.fn of a KindSys record), named as
// its system call.
type Sys uint8

// The memory-map calls, in abi.h's order.
const (
	SysMmap Sys = iota
	SysMunmap
	SysMremap
	SysMadvise
	SysBrk
	NumSys
)

var sysNames = [NumSys]string{"mmap", "munmap", "mremap", "madvise", "brk"}

func (c Sys) String() string {
	if c < NumSys {
		return sysNames[c]
	}
	return "sys?"
}

// Func is an interposed entry point (fl_rec.fn): its index in
// schema.EntryPoints, the table record's uprobes and analyze read too. The
// shim's C names come first, in abi.h's order (FL_FN_*); the families'
// own follow, numbered in csrc/entrypoints.h, which is generated from the
// table (TestEntryPointsHeader).
type Func uint8

// The C names, in abi.h's order (and the table's).
const (
	FuncMalloc Func = iota
	FuncCalloc
	FuncRealloc
	FuncReallocarray
	FuncFree
	FuncMemalign
	FuncAlignedAlloc
	FuncPosixMemalign
	FuncValloc
	FuncPvalloc
	NumCFuncs
)

// NumFuncs is how many entry points schema.EntryPoints lists (a test
// checks it): every Func is below it.
const NumFuncs = 53

func (f Func) String() string {
	if f < NumFuncs {
		return schema.EntryPoints[f].Event
	}
	return "func?"
}

// Args names the integer arguments of f as the recorder's events name
// them (the table's: size, nmemb, oldptr, alignment, memptr, flags, ptr).
func (f Func) Args() []string {
	if f < NumFuncs {
		return schema.EntryPoints[f].Args
	}
	return nil
}

// Status reports whether f returns a status and stores its pointer
// (posix_memalign).
func (f Func) Status() bool { return f < NumFuncs && schema.EntryPoints[f].Status }
