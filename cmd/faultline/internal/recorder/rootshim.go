package recorder

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/internal/inject"
	"golang.org/x/sys/unix"
)

// A process in a mount namespace of its own (a container's, a service's
// private /tmp) cannot open the copy publicShim makes in record's /tmp.
// rootShim puts the copy inside the process's root instead, in a
// directory that is its own /tmp or like it: sticky and writable by every
// user, so that no user of the container can have prepared the name, and
// record creates only a new file of its own there (O_EXCL, O_NOFOLLOW),
// reached through /proc/PID/root with openat2's RESOLVE_IN_ROOT and no
// symbolic links, so that nothing in the container leads record's writes
// out of it.

// rootShimDirs are the directories tried in the process's root, in order.
var rootShimDirs = []string{"/tmp", "/dev/shm", "/var/tmp"}

// sharesRoot reports whether pid resolves paths as record does: the same
// mount namespace and the same root directory.
func sharesRoot(pid int) bool {
	same := func(a, b string) bool {
		var x, y unix.Stat_t
		return unix.Stat(a, &x) == nil && unix.Stat(b, &y) == nil && x.Dev == y.Dev && x.Ino == y.Ino
	}
	p := "/proc/" + strconv.Itoa(pid)
	return same("/proc/self/ns/mnt", p+"/ns/mnt") && same("/proc/self/root", p+"/root")
}

// rootShim writes obj to a new file, mode 0444, in the first of
// rootShimDirs in pid's root that every user may write to and search,
// sticky, on a filesystem that allows executable mappings. The copy's
// path is as the process sees it; remove unlinks it through the
// directory record opened (a mapping of it outlives the name). An
// *inject.RefusedError says why no directory would do.
func rootShim(pid int, obj []byte) (*shimCopy, error) {
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &inject.RefusedError{Reason: fmt.Sprintf("cannot open its root directory to copy the shim into: %v", err)}
	}
	defer unix.Close(rootfd)
	var why []string
	for _, dir := range rootShimDirs {
		c, err := rootShimIn(rootfd, dir, obj)
		if err == nil {
			return c, nil
		}
		why = append(why, dir+": "+err.Error())
	}
	return nil, &inject.RefusedError{Reason: "no directory in its root to copy the shim into (" + strings.Join(why, "; ") + ")"}
}

func rootShimIn(rootfd int, dir string, obj []byte) (*shimCopy, error) {
	fd, err := unix.Openat2(rootfd, strings.TrimLeft(dir, "/"), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(fd), dir)
	var st unix.Stat_t
	var fs unix.Statfs_t
	switch {
	case unix.Fstat(fd, &st) != nil || unix.Fstatfs(fd, &fs) != nil:
		err = errors.New("cannot stat it")
	case st.Mode&(unix.S_ISVTX|0o003) != unix.S_ISVTX|0o003:
		err = fmt.Errorf("mode %#o, not sticky and writable by every user", st.Mode&0o7777)
	case fs.Flags&unix.ST_NOEXEC != 0:
		err = errors.New("mounted noexec")
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	removeStaleRootShims(fd, time.Now())
	var r [8]byte
	rand.Read(r[:])
	name := rootShimPrefix + hex.EncodeToString(r[:]) + ".so"
	c := &shimCopy{path: dir + "/" + name, at: d}
	ffd, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
	if err != nil {
		d.Close()
		return nil, err
	}
	f := os.NewFile(uintptr(ffd), name)
	_, err = f.Write(obj)
	if err == nil {
		err = unix.Fchmod(ffd, 0o444) // past the umask
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

const rootShimPrefix = "libfaultline-shim-"

// staleAfter is the age past which a copy in a process's root is one a
// killed record left: an attach maps its copy within prepareWait of
// writing it, and the name goes as soon as it is mapped.
const staleAfter = time.Minute

// removeStaleRootShims unlinks, in the directory dirfd, the copies of
// the shim that records killed between writing and removing them left:
// regular files of record's user named as rootShimIn names them, mode
// 0444, older than staleAfter. A process that mapped one keeps its
// mapping.
func removeStaleRootShims(dirfd int, now time.Time) {
	d, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(d), "shim directory")
	defer f.Close()
	names, _ := f.Readdirnames(4096)
	for _, n := range names {
		if !strings.HasPrefix(n, rootShimPrefix) || !strings.HasSuffix(n, ".so") {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(dirfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
			st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o7777 != 0o444 || int(st.Uid) != os.Geteuid() ||
			now.Sub(time.Unix(st.Mtim.Unix())) < staleAfter {
			continue
		}
		unix.Unlinkat(dirfd, n, 0)
	}
}
