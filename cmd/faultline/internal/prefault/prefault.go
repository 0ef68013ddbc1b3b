// Package prefault maps faultline's own code and read-only data into its
// page tables at start, with one madvise(MADV_POPULATE_READ) per mapping,
// instead of a page fault for each 64 KiB the first time it is executed
// or read. The file's pages are in the page cache already (the kernel
// read them to start the program); what a fault costs is the trap, and on
// a virtual machine a trap into the guest kernel is dear. `faultline
// version` alone took about 190 such faults in its code and read-only
// data, where the two madvise calls take under a millisecond for all of
// them (17 MB).
//
// Importing the package is all it takes. It imports package launch first,
// so the launcher faultline record starts a command with (which execs in
// launch's init) never does this, and only early packages of the standard
// library, so that the runtime runs its init before most others. Linux
// before 5.14 has no MADV_POPULATE_READ: the call fails and nothing
// changes.
package prefault

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	_ "github.com/faultline/faultline/cmd/faultline/internal/launch"
)

// madvPopulateRead is MADV_POPULATE_READ (Linux 5.14).
const madvPopulateRead = 22

// marker is a variable of this binary's data (initialized, so stored in
// the file, not in the anonymous memory after it): its address lies in
// one of the executable's mappings, which names the file.
var marker = byte(1)

// populated counts the mappings init populated (for the test).
var populated int

func init() {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	populated = populate(exeRanges(maps, uintptr(unsafe.Pointer(&marker))))
}

// populate maps the pages of the ranges (of file mappings) into the page
// tables, and returns how many ranges it could.
func populate(ranges [][2]uintptr) int {
	n := 0
	for _, r := range ranges {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, r[0], r[1]-r[0], madvPopulateRead); e == 0 {
			n++
		}
	}
	return n
}

// exeRanges returns the read-only and executable mappings of the file
// whose mapping holds the address at (lines of /proc/PID/maps: "lo-hi
// perms offset dev inode path").
func exeRanges(maps []byte, at uintptr) [][2]uintptr {
	type mapping struct {
		lo, hi      uintptr
		perms, file []byte
	}
	var all []mapping
	var file []byte
	for line := range bytes.SplitSeq(maps, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) < 6 {
			continue
		}
		lo, hi, ok := hexRange(f[0])
		if !ok {
			continue
		}
		all = append(all, mapping{lo, hi, f[1], f[5]})
		if lo <= at && at < hi {
			file = f[5]
		}
	}
	var out [][2]uintptr
	for _, m := range all {
		if file != nil && bytes.Equal(m.file, file) && len(m.perms) > 1 && m.perms[0] == 'r' && m.perms[1] != 'w' {
			out = append(out, [2]uintptr{m.lo, m.hi})
		}
	}
	return out
}

// hexRange parses "lo-hi" in hexadecimal.
func hexRange(s []byte) (lo, hi uintptr, ok bool) {
	l, h, ok := bytes.Cut(s, []byte("-"))
	if !ok {
		return 0, 0, false
	}
	a, err1 := strconv.ParseUint(string(l), 16, 64)
	b, err2 := strconv.ParseUint(string(h), 16, 64)
	return uintptr(a), uintptr(b), err1 == nil && err2 == nil && a < b
}
