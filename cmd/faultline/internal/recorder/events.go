package recorder

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize/unwind"
	"golang.org/x/sys/unix"
)

// Every event, the ring owners included, is opened one way: with
// perf_event_open(2) through golang.org/x/sys/unix (openRaw), and rings
// are mapped and read here (ring.go). go-perf (github.com/elastic/go-perf)
// falls short of what a recording needs at each step, so it is not used:
//   - sampling events need read_format PERF_FORMAT_LOST (its CountFormat
//     has no Lost) so that LOST_SAMPLES can be written per event as the
//     kernel counts them;
//   - the sideband needs attr.build_id (its Options have no BuildID);
//   - tracepoint filters need PERF_EVENT_IOC_SET_FILTER, which it does
//     not implement;
//   - its rings can only be mapped on events it opened itself, and its
//     blocking read gives up for good on POLLHUP, which an event waiting
//     for enable-on-exec can report; the rings here are woken by epoll
//     (poller) instead.
// Tracepoint ids come from the tracefs the probes were added to.
// The ring owners are a dummy software event per CPU (per ring), which
// never samples and tracks nothing (the page-fault event carries the
// MMAP2/COMM/FORK/EXIT tracking), so it loses nothing of its own; the
// other events send their records to it with PERF_EVENT_IOC_SET_OUTPUT.

// kind says which ring an event writes to.
type kind int

const (
	kindRange kind = iota // every call, no stack: the shared ring
	kindStack             // stack events: a ring of their own
)

// spec is one event of the recording, opened once per CPU (and per thread
// with -p).
type spec struct {
	name   string
	kind   kind
	attr   perfdata.Attr
	filter string
	dummy  bool // a ring owner
	stack  bool // carries a user stack
	// synthetic: an in-process event (inproc.go), never opened: its
	// samples are written by the recorder with id synthID; format is its
	// TRACING_DATA format.
	synthetic bool
	synthID   uint64
	format    []byte
	// count is the samples written (the session's perSpec entry).
	count *uint64
	// packing: its samples may be packed (its format given to the
	// in-process method's Packer, at its first sample).
	packing bool
}

// Sample layouts. IDENTIFIER first lets perf (and us) find the event of a
// record before knowing its layout; TID|TIME|CPU|IDENTIFIER is the same
// sample_id_all trailer for every event, as perf requires of one file.
const (
	baseSampleType = perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID |
		perfdata.SampleTime | perfdata.SampleCPU
	// readFormat gives each event's id and its lost samples.
	readFormat = perfdata.ReadID | perfdata.ReadLost
)

// userRegsMask is the user registers a stack sample copies for DWARF
// unwinding: perf's default mask for this machine's architecture, which
// symbolize/unwind owns with the register layouts (x86-64: AX..GS and
// R8..R15).
var userRegsMask = unwind.DefaultPerfMask(map[string]unwind.Arch{
	"amd64": unwind.ArchX86_64,
	"arm64": unwind.ArchARM64,
}[runtime.GOARCH])

// openedEvent is one spec opened on one CPU for one thread.
type openedEvent struct {
	spec *spec
	cpu  int
	fd   int
	id   uint64
}

// openRaw opens an event with perf_event_open(2) itself.
func openRaw(a *perfdata.Attr, pid, cpu int) (int, error) {
	ua := unix.PerfEventAttr{
		Type:              uint32(a.Type),
		Size:              uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Config:            a.Config,
		Sample:            a.SamplePeriod,
		Sample_type:       uint64(a.SampleType),
		Read_format:       uint64(a.ReadFormat),
		Bits:              uint64(a.Flags),
		Wakeup:            a.WakeupEvents,
		Sample_regs_user:  a.SampleRegsUser,
		Sample_stack_user: a.SampleStackUser,
		Clockid:           a.ClockID,
	}
	fd, err := unix.PerfEventOpen(&ua, pid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return -1, os.NewSyscallError("perf_event_open", err)
	}
	return fd, nil
}

// eventID asks the kernel for the id samples of fd carry.
func eventID(fd int) (uint64, error) {
	var id uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_ID, uintptr(unsafe.Pointer(&id))); e != 0 {
		return 0, os.NewSyscallError("ioctl PERF_EVENT_IOC_ID", e)
	}
	return id, nil
}

// setOutput sends fd's records to the ring of the event leader.
func setOutput(fd, leader int) error {
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_OUTPUT, leader); err != nil {
		return os.NewSyscallError("ioctl PERF_EVENT_IOC_SET_OUTPUT", err)
	}
	return nil
}

// setFilter sets a tracepoint filter (ftrace filter syntax).
func setFilter(fd int, filter string) error {
	if err := unix.IoctlSetString(fd, unix.PERF_EVENT_IOC_SET_FILTER, filter); err != nil {
		return fmt.Errorf("filter %q: %w", filter, os.NewSyscallError("ioctl PERF_EVENT_IOC_SET_FILTER", err))
	}
	return nil
}

// readLost reads an event's lost-sample count (read_format ID|LOST:
// value, id, lost).
func readLost(fd int) (uint64, error) {
	var b [24]byte
	n, err := unix.Read(fd, b[:])
	if err != nil {
		return 0, os.NewSyscallError("read", err)
	}
	if n < 24 {
		return 0, fmt.Errorf("read of a perf event gave %d bytes, want 24", n)
	}
	return *(*uint64)(unsafe.Pointer(&b[16])), nil
}
