//go:build unix

package perfdata

import (
	"os"

	"golang.org/x/sys/unix"
)

// mmapFile maps f read-only. It returns nil (and the caller reads instead)
// when the file is empty, too large for the address space, or not mappable
// (a pipe, a FUSE file without mmap support, ...).
func mmapFile(f *os.File, size int64) ([]byte, func() error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, nil
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil
	}
	// Ask for huge pages: where the page cache holds the file in 2 MiB
	// folios (and a page-cache miss, read ahead for a VM_HUGEPAGE mapping,
	// makes them), one fault maps 2 MiB and one release unmaps it, instead
	// of 512 page table entries each. With THP set to "madvise" (Debian's
	// default) nothing else enables it. Errors cost only that.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return b, func() error { return unix.Munmap(b) }
}

// dropPages releases the pages of b, a part of a read-only file mapping
// starting at a page boundary: they stay valid and are read back from the
// page cache on the next access. Errors only cost memory and are ignored.
func dropPages(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }
