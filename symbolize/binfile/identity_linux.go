package binfile

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// identityDiffers says how the open file f differs from the identity a
// recording without build IDs gives a mapping (its MMAP2 record's inode
// and inode generation, as in the kernel's perf_event_mmap_event, and the
// file size the mapping implies),
// or "" when it does not. What cannot be read (a fake file system, a file
// system without generations) is not compared, nor is the device alone:
// stat's st_dev is not the superblock's device MMAP2 reports on btrfs
// subvolumes and overlayfs, while the inode number and generation are the
// file's own.
func identityDiffers(k Key, f File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	if k.Ino != 0 && st.Ino != k.Ino {
		return fmt.Sprintf("inode %d, recorded %d: the file was replaced since it ran", st.Ino, k.Ino)
	}
	// A mapping may run to the end of the file's last page; 64 KiB covers
	// every page size.
	if end := (uint64(fi.Size()) + 0xffff) &^ 0xffff; k.MapEnd > end {
		return fmt.Sprintf("%d bytes, but the mapping reached offset %d: the file was replaced since it ran", fi.Size(), k.MapEnd)
	}
	if fd, ok := f.(interface{ Fd() uintptr }); ok && k.Gen != 0 {
		// FS_IOC_GETVERSION reads i_generation, what MMAP2's ino_generation holds.
		if g, err := unix.IoctlGetInt(int(fd.Fd()), fsIocGetversion); err == nil && uint64(uint32(g)) != k.Gen {
			return fmt.Sprintf("inode generation %d, recorded %d: the inode was reused by another file", uint32(g), k.Gen)
		}
	}
	return ""
}

// fsIocGetversion is FS_IOC_GETVERSION, _IOR('v', 1, long) on 64-bit
// Linux (include/uapi/linux/fs.h).
const fsIocGetversion = 0x80087601
