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
	return b, func() error { return unix.Munmap(b) }
}

// dropPages releases the pages of b, a part of a read-only file mapping
// starting at a page boundary: they stay valid and are read back from the
// page cache on the next access. Errors only cost memory and are ignored.
func dropPages(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }
