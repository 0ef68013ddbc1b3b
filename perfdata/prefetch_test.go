//go:build unix

package perfdata

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestPrefetchNeverFaults: Prefetch of a record that ends at the end of a
// mapping, followed by nothing mapped, must not fault even though whole
// cache lines (and prefetchRecord's fixed 8 lines) reach past the end: a
// plain load there would kill the process with SIGSEGV.
func TestPrefetchNeverFaults(t *testing.T) {
	page := unix.Getpagesize()
	m, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	// The second page inaccessible: what follows the record is a hole.
	if err := unix.Mprotect(m[page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	b := m[page-40 : page]
	Prefetch(b, 1<<20)
	Prefetch(b[:0], 64)
	Prefetch(nil, 64)
	prefetchRecord(b)
	prefetchRecord(b[:1])
	prefetchRecord(nil)
	Prefetch(m[:page], 64*1024)
}
