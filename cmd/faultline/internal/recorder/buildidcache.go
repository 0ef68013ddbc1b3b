package recorder

import (
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/faultline/faultline/perfdata/schema"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize/binfile"
	"golang.org/x/sys/unix"
)

// BuildIDCache is perf's build-id cache of one user (perf 6.1,
// tools/perf/util/build-id.c build_id_cache__add): each binary is copied to
// DIR/<path>/<build ID>/elf and named by the symlink
// DIR/.build-id/<xx>/<rest of the ID> -> ../../<path>/<build ID>, so that
// perf report and faultline analyze find the binary that ran after the file
// at <path> has been replaced.
//
// Add runs as root and writes into a directory its user controls: it never
// follows a symbolic link below Dir (every step is an openat with
// O_NOFOLLOW, every file is new, O_EXCL), refuses directories owned by
// anyone but the user or root, and gives what it creates to UID:GID.
type BuildIDCache struct {
	Dir      string // ~/.debug of the user who ran faultline (under sudo, SUDO_USER's)
	UID, GID int    // owner of what Add creates; -1 leaves it to the process
	MaxBytes int64  // bytes Add copies at most; binaries beyond it are skipped
	// MappedBy names, per path, a process that mapped the file
	// (Result.MappedBy): where the path does not name the file that ran
	// here, it is looked up in that process's root (/proc/PID/root), as
	// for a process in a container of its own.
	MappedBy map[string]uint32
}

// CacheReport says what Add did.
type CacheReport struct {
	Added, Present int   // binaries copied, binaries already there
	Bytes          int64 // bytes copied
	// Skipped are the binaries not cached, each with why (over MaxBytes,
	// replaced since it ran, unreadable).
	Skipped []string
	// OverBudget counts the binaries skipped for MaxBytes, and their bytes.
	OverBudget      int
	OverBudgetBytes int64
}

// Add puts each binary of ids (absolute paths; [vdso] and the like are
// left out) into the cache, checking that the file at its path still has
// the recorded build ID. An error is returned only when the cache itself
// cannot be used; a binary that cannot be cached is a line of Skipped.
func (c *BuildIDCache) Add(ids []perfdata.BuildID) (*CacheReport, error) {
	rep := &CacheReport{}
	root, err := c.openRoot()
	if err != nil {
		return rep, err
	}
	defer unix.Close(root)
	budget := c.MaxBytes
	seen := map[string]bool{}
	for _, b := range ids {
		name := b.Filename
		if !strings.HasPrefix(name, "/") || len(b.ID) == 0 || strings.HasSuffix(name, " (deleted)") || schema.IsShimFile(name) {
			continue
		}
		bid := hex.EncodeToString(b.ID)
		if seen[name+"\x00"+bid] || len(bid) < 4 {
			continue
		}
		seen[name+"\x00"+bid] = true
		n, present, err := c.addOne(root, path.Clean(name), bid, &budget)
		switch {
		case errors.Is(err, errOverBudget):
			rep.OverBudget++
			rep.OverBudgetBytes += n
		case err != nil:
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %v", name, err))
		case present:
			rep.Present++
		default:
			rep.Added++
			rep.Bytes += n
		}
	}
	return rep, nil
}

var errOverBudget = errors.New("over the size bound")

// openRoot opens Dir, creating its last component when missing (its
// parent, the user's home, is taken as it is).
func (c *BuildIDCache) openRoot() (int, error) {
	parent, base := path.Split(path.Clean(c.Dir))
	if base == "" || base == "." || base == ".." {
		return -1, fmt.Errorf("build-id cache %q: not a directory name", c.Dir)
	}
	if parent == "" {
		parent = "."
	}
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("build-id cache %s: %w", c.Dir, err)
	}
	defer unix.Close(pfd)
	fd, err := c.subdir(pfd, base)
	if err != nil {
		return -1, fmt.Errorf("build-id cache %s: %w", c.Dir, err)
	}
	return fd, nil
}

// subdir opens (creating it if need be) the directory name in dirfd,
// without following a symbolic link; it must belong to the cache's user
// or to root.
func (c *BuildIDCache) subdir(dirfd int, name string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdirat(dirfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("%s: %w", name, err)
		}
		if fd, err = unix.Openat(dirfd, name, flags, 0); err == nil {
			if err = c.chown(fd); err != nil {
				unix.Close(fd)
				return -1, fmt.Errorf("%s: %w", name, err)
			}
			return fd, nil
		}
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, fmt.Errorf("%s is a symbolic link or not a directory; not followed", name)
		}
		return -1, fmt.Errorf("%s: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Uid != 0 && (c.UID < 0 && int(st.Uid) != os.Geteuid() || c.UID >= 0 && int(st.Uid) != c.UID) {
		unix.Close(fd)
		return -1, fmt.Errorf("%s belongs to uid %d, not to the cache's user", name, st.Uid)
	}
	return fd, nil
}

func (c *BuildIDCache) chown(fd int) error {
	if c.UID < 0 {
		return nil
	}
	return unix.Fchown(fd, c.UID, c.GID)
}

// walk opens root/comps... creating what is missing.
func (c *BuildIDCache) walk(root int, comps []string) (int, error) {
	fd := root
	for _, comp := range comps {
		next, err := c.subdir(fd, comp)
		if fd != root {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// addOne caches the binary at name (clean, absolute) with build ID bid:
// the bytes it copied and whether it was there already.
func (c *BuildIDCache) addOne(root int, name, bid string, budget *int64) (int64, bool, error) {
	comps := append(strings.Split(strings.TrimPrefix(name, "/"), "/"), bid)
	for _, p := range comps {
		if p == "" || p == "." || p == ".." {
			return 0, false, fmt.Errorf("not a plain path")
		}
	}
	dir, err := c.walk(root, comps)
	if err != nil {
		return 0, false, err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	present := unix.Fstatat(dir, "elf", &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	var n int64
	if !present {
		if n, err = c.copyBinary(dir, name, bid, budget); err != nil {
			return n, false, err
		}
	}
	if err := c.link(root, name, bid); err != nil {
		return n, present, err
	}
	return n, present, nil
}

// copyBinary copies the file at name, if it still has build ID bid, to
// dir/elf through a new file of its own.
func (c *BuildIDCache) copyBinary(dir int, name, bid string, budget *int64) (int64, error) {
	src, fi, err := c.openRan(name, bid)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && c.UID >= 0 && !readableBy(st, c.UID, c.GID) {
		// An execute-only binary: root may read it, its user may not.
		return 0, fmt.Errorf("not readable by uid %d (mode %v), so not copied into their cache", c.UID, fi.Mode().Perm())
	}
	if fi.Size() > *budget {
		return fi.Size(), errOverBudget
	}
	tmp := ".elf." + strconv.Itoa(os.Getpid())
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return 0, err
	}
	dst := os.NewFile(uintptr(fd), tmp)
	n, err := io.Copy(dst, io.NewSectionReader(src, 0, fi.Size()))
	if err == nil {
		err = c.chown(fd)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// renameat replaces the name itself: nothing is followed.
		err = unix.Renameat(dir, tmp, dir, "elf")
	}
	if err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return 0, err
	}
	*budget -= n
	return n, nil
}

// link makes .build-id/xx/<rest> -> ../../<name>/<bid>, as perf does.
func (c *BuildIDCache) link(root int, name, bid string) error {
	dir, err := c.walk(root, []string{".build-id", bid[:2]})
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	err = unix.Symlinkat("../.."+name+"/"+bid, dir, bid[2:])
	switch {
	case errors.Is(err, unix.EEXIST):
		return nil
	case err != nil:
		return err
	}
	if c.UID >= 0 {
		return unix.Fchownat(dir, bid[2:], c.UID, c.GID, unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil
}

// readableBy reports whether the file st describes may be read by uid:gid
// (supplementary groups aside: a file readable only by one of those is
// left out).
func readableBy(st *syscall.Stat_t, uid, gid int) bool {
	switch {
	case int(st.Uid) == uid:
		return st.Mode&0o400 != 0
	case gid >= 0 && int(st.Gid) == gid:
		return st.Mode&0o040 != 0
	}
	return st.Mode&0o004 != 0
}

// openRan opens the file at name if it has build ID bid: the path as it
// is, else (when it is missing or another file there) the path inside the
// root of the process that mapped it (MappedBy), as a process in its own
// mount namespace sees it.
func (c *BuildIDCache) openRan(name, bid string) (*os.File, os.FileInfo, error) {
	f, fi, err := openWithBuildID(name, bid, func() (*os.File, error) {
		// The kernel's path names no symbolic link at its end; one
		// there now is not the file that ran.
		return os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	})
	pid := c.MappedBy[name]
	if err == nil || pid == 0 {
		return f, fi, err
	}
	f, fi, rerr := openWithBuildID(name, bid, func() (*os.File, error) { return OpenInRoot(int(pid), name) })
	if rerr != nil {
		return nil, nil, fmt.Errorf("%v; in the root of process %d: %v", err, pid, rerr)
	}
	return f, fi, nil
}

// openWithBuildID opens a regular file with open and checks that its
// build ID is bid.
func openWithBuildID(name, bid string, open func() (*os.File, error)) (*os.File, os.FileInfo, error) {
	src, err := open()
	if err != nil {
		return nil, nil, err
	}
	fi, err := src.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file")
	}
	if err == nil {
		var id []byte
		if id, err = binfile.ReaderBuildID(name, src); err == nil && hex.EncodeToString(id) != bid {
			err = fmt.Errorf("build ID now %x, recorded %s: replaced since it ran", id, bid)
		}
	}
	if err != nil {
		src.Close()
		return nil, nil, err
	}
	return src, fi, nil
}
