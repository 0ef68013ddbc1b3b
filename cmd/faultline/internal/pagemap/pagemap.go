// Package pagemap reads which pages of a process's anonymous memory are
// resident, swapped out or mapped as huge pages, from its page tables:
// the PAGEMAP_SCAN ioctl on /proc/PID/pagemap (Linux 6.7 on; see the
// kernel's Documentation/admin-guide/mm/pagemap.rst), or, on older
// kernels, the 8-byte entries the same file gives per page.
//
// Anonymous memory is what the process's RssAnon counts: pages of private
// mappings that are not the page cache's (heap, stacks, anonymous maps,
// the copied-on-write pages of private file mappings). The shared zero
// page a read of untouched anonymous memory maps is not counted: it is
// no memory of the process's own.
package pagemap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Flags say what a range's pages are.
type Flags uint8

// Range flags.
const (
	Present Flags = 1 << iota // resident in memory
	Swapped                   // in swap
	Huge                      // mapped by a huge page (a PMD-mapped THP)
)

// Range is a run of pages [Start, End) that share their flags.
type Range struct {
	Start, End uint64
	Flags      Flags
}

// PageSize is the base page the ranges are counted in.
const PageSize = 4096

// The kernel's PAGEMAP_SCAN ABI (include/uapi/linux/fs.h).
const (
	pageIsFile    = 1 << 2
	pageIsPresent = 1 << 3
	pageIsSwapped = 1 << 4
	pageIsPFNZero = 1 << 5
	pageIsHuge    = 1 << 6
	// _IOWR('f', 16, struct pm_scan_arg): 96 bytes of argument.
	pagemapScan = 0xc0606610
)

// pmScanArg is struct pm_scan_arg.
type pmScanArg struct {
	size, flags, start, end, walkEnd, vec, vecLen, maxPages       uint64
	categoryInverted, categoryMask, categoryAnyofMask, returnMask uint64
}

// pageRegion is struct page_region.
type pageRegion struct{ start, end, categories uint64 }

// Scanner reads processes' anonymous residency. Its buffers are reused
// from scan to scan; it is not safe for concurrent use.
type Scanner struct {
	vec     []pageRegion
	buf     []byte
	noScan  bool // the kernel lacks PAGEMAP_SCAN: read entries
	scanned int  // ioctl calls made, for tests
}

// NewScanner returns a Scanner whose ioctl fills up to 1024 ranges a call.
func NewScanner() *Scanner { return &Scanner{vec: make([]pageRegion, 1024)} }

// ErrGone says the process ended (or became a zombie) before its page
// tables could be read.
var ErrGone = errors.New("process gone")

// Scan appends pid's anonymous ranges that are present or swapped to dst,
// in address order, and returns it. Reading another user's process needs
// the rights ptrace's read mode does (root, or the same user).
func (s *Scanner) Scan(dst []Range, pid int) ([]Range, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/pagemap")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return dst, ErrGone
		}
		return dst, err
	}
	defer f.Close()
	if !s.noScan {
		out, err := s.scan(dst, f)
		if !errors.Is(err, unix.ENOTTY) && !errors.Is(err, unix.EINVAL) {
			return out, err
		}
		s.noScan = true
	}
	return s.read(dst, pid, f)
}

// scanEnd is where user address space ends for PAGEMAP_SCAN, which
// checks its range as the caller's own (access_ok): x86-64's and arm64's
// 47- and 48-bit user spaces both end at or above it.
const scanEnd = 1<<47 - PageSize

// scan reads ranges with PAGEMAP_SCAN: the pages that are not the page
// cache's nor the zero page, and are present or swapped.
func (s *Scanner) scan(dst []Range, f *os.File) ([]Range, error) {
	arg := pmScanArg{size: uint64(unsafe.Sizeof(pmScanArg{})), start: 0, end: scanEnd,
		vec: uint64(uintptr(unsafe.Pointer(&s.vec[0]))), vecLen: uint64(len(s.vec)),
		categoryInverted: pageIsFile | pageIsPFNZero, categoryMask: pageIsFile | pageIsPFNZero,
		categoryAnyofMask: pageIsPresent | pageIsSwapped, returnMask: pageIsPresent | pageIsSwapped | pageIsHuge}
	for {
		n, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), pagemapScan, uintptr(unsafe.Pointer(&arg)))
		s.scanned++
		if e != 0 {
			if e == unix.ESRCH {
				return dst, ErrGone
			}
			return dst, fmt.Errorf("PAGEMAP_SCAN: %w", e)
		}
		for _, r := range s.vec[:n] {
			var fl Flags
			if r.categories&pageIsPresent != 0 {
				fl |= Present
			}
			if r.categories&pageIsSwapped != 0 {
				fl |= Swapped
			}
			if r.categories&pageIsHuge != 0 {
				fl |= Huge
			}
			dst = appendRange(dst, Range{r.start, r.end, fl})
		}
		if arg.walkEnd >= arg.end || arg.walkEnd == 0 {
			return dst, nil
		}
		arg.start = arg.walkEnd
	}
}

// appendRange appends r, merging it with the last range when they touch
// and share their flags. A call that filled its vector ends its walk
// (walk_end) inside the range it reported last, and the next call reports
// that range again from there: the part already appended is cut off.
func appendRange(dst []Range, r Range) []Range {
	if k := len(dst); k > 0 && r.Start < dst[k-1].End {
		r.Start = dst[k-1].End
		if r.Start >= r.End {
			return dst
		}
	}
	if k := len(dst); k > 0 && dst[k-1].End == r.Start && dst[k-1].Flags == r.Flags {
		dst[k-1].End = r.End
		return dst
	}
	return append(dst, r)
}

// The bits of a /proc/PID/pagemap entry.
const (
	pmPresent = 1 << 63
	pmSwapped = 1 << 62
	pmFile    = 1 << 61 // a page-cache or shared-anonymous page
	pmPFN     = 1<<55 - 1
)

// read reads the 8-byte entry of every page of pid's private writable
// mappings (the only ones that hold anonymous pages) from f. It cannot
// tell huge pages (that takes /proc/kpageflags) nor, without root, the
// zero page (whose PFN reads as 0 then).
func (s *Scanner) read(dst []Range, pid int, f *os.File) ([]Range, error) {
	maps, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return dst, ErrGone
	}
	defer maps.Close()
	zero := zeroPFNOnce()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		start, end, perms, ok := parseMapsLine(sc.Text())
		if !ok || len(perms) < 4 || perms[1] != 'w' || perms[3] != 'p' {
			continue
		}
		for a := start; a < end; {
			n := min((end-a)/PageSize, 1<<16)
			if cap(s.buf) < int(n)*8 {
				s.buf = make([]byte, n*8)
			}
			b := s.buf[:n*8]
			if _, err := f.ReadAt(b, int64(a/PageSize*8)); err != nil && err != io.EOF {
				return dst, fmt.Errorf("reading pagemap: %w", err)
			}
			for i := uint64(0); i < n; i++ {
				e := binary.NativeEndian.Uint64(b[i*8:])
				var fl Flags
				switch {
				case e&pmFile != 0:
				case e&pmPresent != 0 && (zero == 0 || e&pmPFN != zero):
					fl = Present
				case e&pmSwapped != 0:
					fl = Swapped
				}
				if fl != 0 {
					p := a + i*PageSize
					dst = appendRange(dst, Range{p, p + PageSize, fl})
				}
			}
			a += n * PageSize
		}
	}
	return dst, sc.Err()
}

// parseMapsLine reads the range and permissions of a /proc/PID/maps line.
func parseMapsLine(l string) (start, end uint64, perms string, ok bool) {
	rng, rest, _ := strings.Cut(l, " ")
	perms, _, _ = strings.Cut(rest, " ")
	lo, hi, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, "", false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	return s, e, perms, err1 == nil && err2 == nil && s < e
}

var zeroPFNOnce = sync.OnceValue(zeroPFN)

// zeroPFN is the zero page's frame number as our own pagemap shows it
// (0 without CAP_SYS_ADMIN, which hides every PFN).
func zeroPFN() uint64 {
	b, err := unix.Mmap(-1, 0, PageSize, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0
	}
	defer unix.Munmap(b)
	atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[0]))) // a read maps the zero page
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0
	}
	defer f.Close()
	var e [8]byte
	if _, err := f.ReadAt(e[:], int64(uintptr(unsafe.Pointer(&b[0]))/PageSize*8)); err != nil {
		return 0
	}
	return binary.NativeEndian.Uint64(e[:]) & pmPFN
}

// Bytes sums the ranges' bytes that have all of the flags want.
func Bytes(rs []Range, want Flags) uint64 {
	var n uint64
	for _, r := range rs {
		if r.Flags&want == want {
			n += r.End - r.Start
		}
	}
	return n
}
