// Package hugeheap backs the start of faultline's Go heap with transparent
// huge pages where the kernel gives them only on request (THP mode
// "madvise"), so that the heap faultline builds in its first tens of
// megabytes costs one page fault per 2 MiB instead of one per 4 KiB. On a
// virtual machine a first touch of a 4 KiB page can cost 10-20 µs, which
// made page faults a large part of a short `faultline record` or
// `faultline analyze`.
//
// Importing the package is all it takes: its init grows the heap by
// HeapBytes, advises the heap arena up to there with MADV_HUGEPAGE, and
// lets the allocation go, so that the memory the Go runtime hands out next
// lies in advised pages. It imports package launch first, so the launcher
// faultline record starts a command with (which execs in launch's init)
// never does this. It imports only early packages of the standard library
// (not golang.org/x/sys/unix), so that the runtime runs its init before
// most others, whose allocations then land in advised pages.
package hugeheap

import (
	"bytes"
	"os"
	"syscall"
	"unsafe"

	_ "github.com/faultline/faultline/cmd/faultline/internal/launch"
)

// HeapBytes is how much heap is grown and advised at init. Only what is
// touched later takes memory.
const HeapBytes = 32 << 20

// Where the Go runtime maps heap on 64-bit Linux: arenas of arenaBytes
// (the runtime's heapArenaBytes), aligned to their size, so the arena an
// object lies in is the runtime's from its aligned start.
const (
	arenaBytes = 64 << 20
	hugePage   = 2 << 20
)

// wanted reports whether a faultline run with these arguments builds a
// heap that huge pages pay for. Not record's: its heap is a few megabytes
// touched once, and a huge page the kernel must find and clear costs more
// than the 4 KiB faults it saves where those are cheap; analyze's larger
// heap gains (docs/performance.md has the measurements).
func wanted(args []string) bool {
	return len(args) < 2 || args[1] != "record"
}

// advised is the range init advised, [0] == [1] when it did not.
var advised [2]uintptr

func init() {
	if !wanted(os.Args) {
		return
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !bytes.Contains(mode, []byte("[madvise]")) {
		// "always" needs no advice and "never" ignores it.
		return
	}
	b := make([]byte, HeapBytes)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	beg := p &^ (arenaBytes - 1)
	end := (p + HeapBytes) &^ (hugePage - 1)
	// Advice is a hint: an error leaves the heap as it was.
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, beg, end-beg, syscall.MADV_HUGEPAGE); e == 0 {
		advised = [2]uintptr{beg, end}
	}
}
