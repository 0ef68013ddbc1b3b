// Package perfwarm takes the kernel's one-time cost of a first perf event
// off faultline record's start. Opening an event that follows a task
// (perf_event_open(2) with a pid) switches on the scheduler's perf hooks
// when no other such event exists on the system, and then waits for an
// RCU grace period (account_event in Linux's kernel/events/core.c):
// some 15 ms on a small virtual machine, where record's first event open
// waited for it while the program it records was held at its start. The
// hooks stay on while any task event exists, and for a second after the
// last one closes.
//
// Importing the package is all it takes: when the process is faultline
// record, its init opens a disabled dummy event on the process itself on
// a goroutine of its own, so the wait runs while the runtime finishes
// starting, the packages initialize and record prepares the command.
// Release closes it once record's own events are open. Like package
// hugeheap, it imports only early packages of the standard library, so its
// init runs before most others.
package perfwarm

import (
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// The perf_event_attr fields the event sets, as <linux/perf_event.h> lays
// them out (its first version, PERF_ATTR_SIZE_VER0, is enough).
const (
	attrSizeVer0      = 64
	perfTypeSoftware  = 1
	perfCountSWDummy  = 9
	attrDisabled      = 1 << 0
	attrExcludeKernel = 1 << 5
	attrExcludeHV     = 1 << 6
	perfFlagFDCloexec = 1 << 3
)

// fd is the event, once done is closed: -1 when it is not open.
var (
	fd      = -1
	done    = make(chan struct{})
	release sync.Once
)

// wanted reports whether a faultline run with these arguments records.
func wanted(args []string) bool {
	return len(args) >= 2 && args[1] == "record"
}

func init() {
	if !wanted(os.Args) {
		close(done)
		return
	}
	go open()
}

// open opens the event; a failure (perf_event_paranoid, seccomp) leaves
// nothing open, and record's own open meets the wait instead, or the
// error, which it explains.
func open() {
	defer close(done)
	var attr [attrSizeVer0]byte
	*(*uint32)(unsafe.Pointer(&attr[0])) = perfTypeSoftware
	*(*uint32)(unsafe.Pointer(&attr[4])) = attrSizeVer0
	*(*uint64)(unsafe.Pointer(&attr[8])) = perfCountSWDummy
	*(*uint64)(unsafe.Pointer(&attr[40])) = attrDisabled | attrExcludeKernel | attrExcludeHV
	r, _, e := syscall.Syscall6(syscall.SYS_PERF_EVENT_OPEN, uintptr(unsafe.Pointer(&attr[0])), 0, ^uintptr(0), ^uintptr(0), perfFlagFDCloexec, 0)
	if e != 0 {
		return
	}
	fd = int(r)
}

// Release closes the event, if it was opened, once its open has returned:
// call it when record's own events are open (they keep the hooks on).
func Release() {
	release.Do(func() {
		<-done
		if fd >= 0 {
			syscall.Close(fd)
			fd = -1
		}
	})
}
