package shim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/faultline/faultline/perfdata/schema"
	"golang.org/x/sys/unix"
)

// Options configure a region.
type Options struct {
	Slots      int    // rings: threads of the program alive at once, at most MaxSlots
	RingBytes  int    // data bytes per ring, a power of two ≥ 256 KiB
	StackSize  uint32 // stack bytes copied per sampled call (0: no stacks)
	StackEvery uint32 // 1 in StackEvery smaller calls is sampled
	StackMin   uint64 // calls of at least StackMin bytes are all sampled
	Words      int    // top-of-stack words per entry, at most MaxWords
	Glibc      bool   // the allocator is glibc's: returns carry its chunk header
	WaitNs     uint64 // the longest a thread waits for room before recording stops
	// TSC: the shim stamps calls from the CPU's time-stamp counter,
	// converted to CLOCK_MONOTONIC (csrc/clock.c); see TSCUsable.
	TSC bool
	// MapCalls: the shim records the memory-map calls the program makes
	// through the C library (KindSys).
	MapCalls bool
	// Family is the program's allocator family: which shim object is
	// preloaded (ObjectFor).
	Family schema.Family
}

// Region is the shared memory the shim writes: a memfd the program maps
// through /proc/PID/fd (see Env), and the shim object itself in a second
// memfd, preloaded from there, so nothing is written to the file system.
type Region struct {
	rings, lib *os.File
	ino        uint64
	mem        []byte
	nslots     int
	ringBytes  int
	live       []*Ring
	bySlot     map[int]*Ring
	hostIDs    func(pid, tid uint32) (uint32, uint32, bool)
	// Counters of the rings freed so far.
	freedNested, freedWaits, freedClockReads, freedInterrupted uint64
}

// NewRegion creates a region.
func NewRegion(o Options) (*Region, error) {
	if err := checkOptions(o); err != nil {
		return nil, err
	}
	size := CtrlBytes + o.Slots*(RingHeader+o.RingBytes)
	rings, err := memfd("faultline-rings", size)
	if err != nil {
		return nil, err
	}
	return newRegion(o, rings, size)
}

// AttachRegion makes a region of the memfd rings, which a running
// program made for it (csrc/attach.c: faultline_attach_prepare); the
// region takes the file.
func AttachRegion(o Options, rings *os.File) (*Region, error) {
	if err := checkOptions(o); err != nil {
		rings.Close()
		return nil, err
	}
	size := CtrlBytes + o.Slots*(RingHeader+o.RingBytes)
	if err := rings.Truncate(int64(size)); err != nil {
		rings.Close()
		return nil, fmt.Errorf("shim: sizing the rings: %w", err)
	}
	return newRegion(o, rings, size)
}

func newRegion(o Options, rings *os.File, size int) (*Region, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(rings.Fd()), &st); err != nil {
		rings.Close()
		return nil, fmt.Errorf("shim: %w", os.NewSyscallError("fstat", err))
	}
	mem, err := unix.Mmap(int(rings.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE)
	if err != nil {
		rings.Close()
		return nil, fmt.Errorf("shim: mapping the rings: %w", os.NewSyscallError("mmap", err))
	}
	obj, _ := ObjectFor(o.Family)
	lib, err := memfd("faultline-shim", len(obj))
	if err == nil {
		_, err = lib.WriteAt(obj, 0)
		if err != nil {
			lib.Close()
		}
	}
	if err != nil {
		unix.Munmap(mem)
		rings.Close()
		return nil, fmt.Errorf("shim: %w", err)
	}
	r := &Region{rings: rings, lib: lib, ino: st.Ino, mem: mem, nslots: o.Slots, ringBytes: o.RingBytes, bySlot: map[int]*Ring{}}
	ne := binary.NativeEndian
	ne.PutUint32(mem[offVersion:], Version)
	ne.PutUint32(mem[offNSlots:], uint32(o.Slots))
	ne.PutUint32(mem[offRingBytes:], uint32(o.RingBytes))
	ne.PutUint32(mem[offStackSize:], o.StackSize)
	ne.PutUint32(mem[offStackEvery:], max(o.StackEvery, 1))
	ne.PutUint64(mem[offStackMin:], o.StackMin)
	ne.PutUint32(mem[offWords:], uint32(o.Words))
	if o.Glibc {
		ne.PutUint32(mem[offGlibc:], 1)
	}
	ne.PutUint64(mem[offWaitNs:], o.WaitNs)
	if o.TSC {
		ne.PutUint32(mem[offTSC:], 1)
	}
	if o.MapCalls {
		ne.PutUint32(mem[offMapCalls:], 1)
	}
	// The recorder is always willing to be woken.
	ne.PutUint32(mem[offSleeping:], 1)
	atomic.StoreUint32(r.u32(offMagic), Magic)
	return r, nil
}

func checkOptions(o Options) error {
	switch {
	case o.Slots <= 0 || o.Slots > MaxSlots:
		return fmt.Errorf("shim: %d rings: want 1 to %d", o.Slots, MaxSlots)
	case o.RingBytes < 256<<10 || o.RingBytes&(o.RingBytes-1) != 0:
		return fmt.Errorf("shim: ring of %d bytes: want a power of two of at least 256 KiB", o.RingBytes)
	case o.Words < 0 || o.Words > MaxWords:
		return fmt.Errorf("shim: %d top-of-stack words: want at most %d", o.Words, MaxWords)
	case o.StackSize > MaxStack || o.StackSize%8 != 0:
		return fmt.Errorf("shim: stack size %d: want a multiple of 8 up to %d", o.StackSize, MaxStack)
	}
	return nil
}

func memfd(name string, size int) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (r *Region) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }
func (r *Region) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

// Env returns the environment entries that make a program record into r:
// LD_PRELOAD with the shim first (before preload, the user's LD_PRELOAD, so
// an allocator preloaded there is the one the shim calls) and the region's
// name. The paths are this process's /proc/PID/fd entries: they exist as
// long as the recorder does.
func (r *Region) Env(preload string) []string {
	pid := os.Getpid()
	lib := r.objectPath()
	if preload != "" {
		lib += ":" + preload
	}
	return []string{
		"LD_PRELOAD=" + lib,
		EnvName + "=" + strconv.Itoa(pid) + ":" + strconv.Itoa(int(r.rings.Fd())) + ":" + strconv.FormatUint(r.ino, 10),
	}
}

// Launcher returns the path that runs the shim object as faultline
// record's launcher (csrc/launch.c).
func (r *Region) Launcher() string { return r.objectPath() }

// objectPath is this process's /proc/PID/fd entry of the shim object,
// which exists as long as the recorder does.
func (r *Region) objectPath() string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(r.lib.Fd()))
}

// Detach tells every thread to stop recording (and waiting).
func (r *Region) Detach() {
	atomic.StoreUint32(r.u32(offDetached), 1)
	for _, g := range r.live {
		g.wake()
	}
}

// Abandoned reports whether a thread gave up waiting for room (the
// recorder did not drain for WaitNs), and when (CLOCK_MONOTONIC ns).
func (r *Region) Abandoned() (bool, uint64) {
	if atomic.LoadUint32(r.u32(offAbandoned)) == 0 {
		return false, 0
	}
	return true, atomic.LoadUint64(r.u64(offAbandonedTime))
}

// TSCJumps reports how many times a thread found the TSC disagreeing with
// CLOCK_MONOTONIC (Options.TSC), after which the program's threads read
// CLOCK_MONOTONIC, and when the first was (CLOCK_MONOTONIC ns).
func (r *Region) TSCJumps() (uint32, uint64) {
	n := atomic.LoadUint32(r.u32(offTSCJumps))
	if n == 0 {
		return 0, 0
	}
	return n, atomic.LoadUint64(r.u64(offTSCJumpTime))
}

// Counters are what the shim counted: calls it could not record, and
// how it ran.
type Counters struct {
	Unrecorded uint64 // calls not recorded: of threads that found no free ring, or after a thread gave up waiting
	SlotsFull  uint64 // threads that found no free ring
	Nested     uint64 // calls made by the shim's own work (not the program's)
	// Interrupted counts the program's calls that came while the shim
	// was recording a call of the same thread (from a signal handler):
	// not recorded.
	Interrupted uint64
	Waits       uint64 // times a thread waited for room in its ring
	// ClockReads counts the shim's reads of CLOCK_MONOTONIC: one per
	// stamp, or with Options.TSC only those that calibrate the TSC.
	ClockReads uint64
	// Resident is the bytes of the region in memory: the rings' pages
	// the threads populated (a step at a time, as they fill them) and the
	// control block.
	Resident uint64
}

// Counters returns what the shim counted so far (rings freed meanwhile
// are included).
func (r *Region) Counters() Counters {
	c := Counters{
		Unrecorded: atomic.LoadUint64(r.u64(offUnrecorded)),
		SlotsFull:  atomic.LoadUint64(r.u64(offSlotsFull)),
	}
	c.Nested, c.Waits, c.ClockReads, c.Interrupted = r.freedNested, r.freedWaits, r.freedClockReads, r.freedInterrupted
	var st unix.Stat_t
	if unix.Fstat(int(r.rings.Fd()), &st) == nil {
		c.Resident = uint64(st.Blocks) * 512
	}
	for _, g := range r.bySlot {
		c.Nested += atomic.LoadUint64(g.u64(offNested))
		c.Interrupted += atomic.LoadUint64(g.u64(offInterrupted))
		c.Waits += atomic.LoadUint64(g.u64(offWaits))
		c.ClockReads += atomic.LoadUint64(g.u64(offClockReads))
	}
	return c
}

// WakeWord is the futex word a producer bumps to wake the recorder
// (FUTEX_WAIT on it, shared, not private).
func (r *Region) WakeWord() *uint32 { return r.u32(offWake) }

// Close unmaps the region and closes both memfds.
func (r *Region) Close() error {
	err := unix.Munmap(r.mem)
	r.rings.Close()
	r.lib.Close()
	return err
}

// SetHostIDs has Rings name each ring's thread by ids(pid, tid) where ok:
// a program in a PID namespace of its own writes the ids it sees there,
// and the recording names threads as record's namespace does.
func (r *Region) SetHostIDs(ids func(pid, tid uint32) (hostPid, hostTid uint32, ok bool)) {
	r.hostIDs = ids
}

// Rings returns the rings claimed so far (a thread claims one at its
// first allocator call); the slice is reused by the next call.
func (r *Region) Rings() []*Ring {
	for i := 0; i < r.nslots; i++ {
		if atomic.LoadUint32(r.u32(offSlotState+4*i)) != slotClaimed {
			continue
		}
		if _, ok := r.bySlot[i]; ok {
			continue
		}
		base := CtrlBytes + i*(RingHeader+r.ringBytes)
		g := &Ring{region: r, slot: i, hdr: r.mem[base : base+RingHeader], data: r.mem[base+RingHeader : base+RingHeader+r.ringBytes]}
		if atomic.LoadUint32(g.u32(offPid)) == 0 {
			continue // claimed, not yet set up
		}
		g.pid = atomic.LoadUint32(g.u32(offPid))
		g.tid = atomic.LoadUint32(g.u32(offTid))
		if r.hostIDs != nil {
			if pid, tid, ok := r.hostIDs(g.pid, g.tid); ok {
				g.pid, g.tid = pid, tid
			}
		}
		r.bySlot[i] = g
		r.live = append(r.live, g)
	}
	return r.live
}

// Free returns g's slot for another thread to claim: call it only when
// its thread is gone and g is drained.
func (r *Region) Free(g *Ring) {
	r.freedNested += atomic.LoadUint64(g.u64(offNested))
	r.freedInterrupted += atomic.LoadUint64(g.u64(offInterrupted))
	r.freedWaits += atomic.LoadUint64(g.u64(offWaits))
	r.freedClockReads += atomic.LoadUint64(g.u64(offClockReads))
	atomic.StoreUint32(g.u32(offPid), 0)
	atomic.StoreUint32(r.u32(offSlotState+4*g.slot), slotFree)
	for i, x := range r.live {
		if x == g {
			r.live = append(r.live[:i], r.live[i+1:]...)
			break
		}
	}
	delete(r.bySlot, g.slot)
}

// Ring is one thread's ring.
type Ring struct {
	region    *Region
	slot      int
	hdr, data []byte
	pid, tid  uint32
	tail      uint64 // consumed locally, published by Release
}

func (g *Ring) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&g.hdr[off])) }
func (g *Ring) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&g.hdr[off])) }

// Pid and Tid are the owner's process and thread ids.
func (g *Ring) Pid() uint32 { return g.pid }
func (g *Ring) Tid() uint32 { return g.tid }

// Busy reports whether the owner is between its clock read and the
// commit of a record: a record stamped before now may still come.
func (g *Ring) Busy() bool { return atomic.LoadUint32(g.u32(offBusy)) != busyNo }

// InCall reports whether the owner is inside a call it will write whole
// (KindCall) at its return, stamped with its entry's time: records it
// commits before then do not end that.
func (g *Ring) InCall() bool { return atomic.LoadUint32(g.u32(offBusy)) == busyCall }

// Head is how many bytes the owner has committed.
func (g *Ring) Head() uint64 { return atomic.LoadUint64(g.u64(offHead)) }

// Empty reports whether everything committed has been consumed.
func (g *Ring) Empty() bool { return g.tail == g.Head() }

// ErrCorrupt is a ring whose records do not parse: a bug or a program
// that wrote over the shared memory.
var ErrCorrupt = errors.New("shim: corrupt ring")

// Peek reads the next committed record into rec, or reports false when
// there is none. The record's bytes are shared memory: valid until
// Release. (It fills the caller's Record rather than returning one: the
// drain calls it for every record, and a returned struct is copied
// through the stack once more.)
func (g *Ring) Peek(head uint64, rec *Record) (bool, error) {
	data := g.data
	mask := uint64(len(data)) - 1 // a power of two
	for g.tail < head {
		off := g.tail & mask
		b := data[off:]
		if len(b) < 8 {
			return false, fmt.Errorf("%w: record at ring offset %d of thread %d", ErrCorrupt, off, g.tid)
		}
		size := uint64(binary.NativeEndian.Uint32(b))
		kind := b[4]
		if size < 8 || size%8 != 0 || size > uint64(len(b)) || g.tail+size > head {
			return false, fmt.Errorf("%w: record of %d bytes at ring offset %d of thread %d", ErrCorrupt, size, off, g.tid)
		}
		if kind == KindPad {
			g.tail += size
			continue
		}
		if size < RecHeader {
			return false, fmt.Errorf("%w: record of %d bytes at ring offset %d of thread %d", ErrCorrupt, size, off, g.tid)
		}
		b = b[:size]
		rec.Kind, rec.Func, rec.Flags = kind, Func(b[5]), binary.NativeEndian.Uint16(b[6:])
		rec.Time, rec.Body = binary.NativeEndian.Uint64(b[8:]), b[RecHeader:]
		return true, nil
	}
	return false, nil
}

// Consume moves past the record Peek returned.
func (g *Ring) Consume(rec *Record) { g.tail += uint64(len(rec.Body) + RecHeader) }

// Release hands the consumed bytes back to the owner, waking it if it
// waits for room.
func (g *Ring) Release() {
	if atomic.LoadUint64(g.u64(offTail)) == g.tail {
		return
	}
	atomic.StoreUint64(g.u64(offTail), g.tail)
	atomic.AddUint32(g.u32(offTailSeq), 1)
	if atomic.LoadUint32(g.u32(offWaiting)) != 0 {
		g.wake()
	}
}

func (g *Ring) wake() {
	futexWake(g.u32(offTailSeq))
}

// Record is one call as the shim wrote it.
type Record struct {
	Kind  uint8
	Func  Func
	Flags uint16
	Time  uint64 // CLOCK_MONOTONIC ns
	Body  []byte // after the header
}

// Entry fields.

// IP is the allocator function's address (entries, returns, frees).
func (r *Record) IP() uint64 { return binary.NativeEndian.Uint64(r.Body) }

// Arg is an entry's i-th integer argument.
func (r *Record) Arg(i int) uint64 { return binary.NativeEndian.Uint64(r.Body[8+8*i:]) }

// SP and BP are the stack and frame pointers at the function's entry.
func (r *Record) SP() uint64 { return binary.NativeEndian.Uint64(r.Body[32:]) }
func (r *Record) BP() uint64 { return binary.NativeEndian.Uint64(r.Body[40:]) }

// Words are the entry's top-of-stack words: words of them, or with
// FlagShort one.
func (r *Record) Words(words int) ([]byte, bool) {
	words = r.carried(words)
	if len(r.Body) < EntryFixed+8*words {
		return nil, false
	}
	return r.Body[EntryFixed : EntryFixed+8*words], true
}

// carried is how many top words an entry carries when the region's
// entries carry words.
func (r *Record) carried(words int) int {
	if r.Flags&FlagShort != 0 {
		return 1
	}
	return words
}

// Stack returns a sampled entry's registers (fl_regs) and stack bytes.
func (r *Record) Stack(words int) (regs, stack []byte, ok bool) {
	at := EntryFixed + 8*r.carried(words)
	if r.Flags&(FlagStackBig|FlagStackSmall) == 0 || len(r.Body) < at+RegsBytes+8 {
		return nil, nil, false
	}
	regs = r.Body[at : at+RegsBytes]
	n := binary.NativeEndian.Uint64(r.Body[at+RegsBytes:])
	rest := r.Body[at+RegsBytes+8:]
	if n > uint64(len(rest)) {
		return nil, nil, false
	}
	return regs, rest[:n], true
}

// Return fields (of a whole call too): Ptr, Hdr, RetIP; Status (a
// return's only).
func (r *Record) Ptr() uint64    { return binary.NativeEndian.Uint64(r.Body[8:]) }
func (r *Record) Hdr() uint64    { return binary.NativeEndian.Uint64(r.Body[16:]) }
func (r *Record) RetIP() uint64  { return binary.NativeEndian.Uint64(r.Body[24:]) }
func (r *Record) Status() uint64 { return binary.NativeEndian.Uint64(r.Body[32:]) }

// Whole-call fields: the entry's time, its i-th argument (of two) and
// its stack pointer.
func (r *Record) EntryTime() uint64    { return binary.NativeEndian.Uint64(r.Body[32:]) }
func (r *Record) CallArg(i int) uint64 { return binary.NativeEndian.Uint64(r.Body[40+8*i:]) }
func (r *Record) CallSP() uint64       { return binary.NativeEndian.Uint64(r.Body[56:]) }

// Memory-map call fields (KindSys): the system call's i-th argument (of
// five), its result (an address, 0, or -errno), and with FlagStackBig
// the registers and stack at the wrapper's entry.
func (r *Record) SysArg(i int) uint64 { return binary.NativeEndian.Uint64(r.Body[8*i:]) }
func (r *Record) SysRet() int64       { return int64(binary.NativeEndian.Uint64(r.Body[40:])) }

// SysStack returns a memory-map call's registers (fl_regs) and stack
// bytes, if it carries them.
func (r *Record) SysStack() (regs, stack []byte, ok bool) {
	if r.Kind != KindSys || r.Flags&FlagStackBig == 0 || len(r.Body) < SysSize+RegsBytes+8 {
		return nil, nil, false
	}
	regs = r.Body[SysSize : SysSize+RegsBytes]
	n := binary.NativeEndian.Uint64(r.Body[SysSize+RegsBytes:])
	rest := r.Body[SysSize+RegsBytes+8:]
	if n > uint64(len(rest)) {
		return nil, nil, false
	}
	return regs, rest[:n], true
}

// Valid reports whether the record's body is as long as its kind needs.
func (r *Record) Valid(words int) bool {
	switch r.Kind {
	case KindEntry:
		return len(r.Body) >= EntryFixed+8*r.carried(words) && r.Func < NumFuncs
	case KindReturn:
		return len(r.Body) >= ReturnSize && r.Func < NumFuncs
	case KindFree:
		return len(r.Body) >= FreeSize
	case KindCall:
		return len(r.Body) >= CallSize && r.Func < NumFuncs && r.Func != FuncFree
	case KindSys:
		return len(r.Body) >= SysSize && Sys(r.Func) < NumSys
	}
	return false
}

func futexWake(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), 1 /* FUTEX_WAKE */, 1<<30, 0, 0, 0)
}

// Wake bumps the wake word and wakes whoever sleeps on it (WaitWake), as
// a producer does.
func (r *Region) Wake() {
	atomic.AddUint32(r.WakeWord(), 1)
	futexWake(r.WakeWord())
}

// WaitWake sleeps until a producer bumps the wake word from seen, or for
// at most timeoutNs.
func (r *Region) WaitWake(seen uint32, timeoutNs int64) {
	r.waitWake(seen, timeoutNs, unix.Syscall6)
}

// WaitWakeHeld is WaitWake as a raw system call, which the Go scheduler
// does not see: the goroutine keeps its P while it sleeps. The caller
// must be locked to its thread and have a P to spare. A signal ends the
// sleep early (the runtime's preemption signal, which a stop of the
// world sends, too).
func (r *Region) WaitWakeHeld(seen uint32, timeoutNs int64) {
	r.waitWake(seen, timeoutNs, unix.RawSyscall6)
}

func (r *Region) waitWake(seen uint32, timeoutNs int64, call func(trap, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, uintptr, unix.Errno)) {
	ts := unix.NsecToTimespec(timeoutNs)
	call(unix.SYS_FUTEX, uintptr(unsafe.Pointer(r.WakeWord())), 0 /* FUTEX_WAIT */, uintptr(seen), uintptr(unsafe.Pointer(&ts)), 0, 0)
}
