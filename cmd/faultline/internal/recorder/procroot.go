package recorder

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/faultline/faultline/symbolize/binfile"
	"golang.org/x/sys/unix"
)

// OpenInRoot opens the file at path (absolute) as process pid sees it: the
// path is resolved inside /proc/PID/root, the process's root directory (a
// container's, after its pivot_root), with openat2's RESOLVE_IN_ROOT, so
// that a symbolic link or ".." in it stays inside that root instead of
// reaching the host's files, and RESOLVE_NO_MAGICLINKS, so that no
// /proc/self/fd-like link leads out either. The last component is not
// followed (O_NOFOLLOW): the kernel's mapping paths name no link there.
func OpenInRoot(pid int, path string) (*os.File, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%s: not an absolute path", path)
	}
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	dirfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat2(dirfd, strings.TrimLeft(path, "/"), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s%s: %w", root, path, err)
	}
	return os.NewFile(uintptr(fd), root+path), nil
}

// mappedBuildID is the build ID of the file process pid maps at m, read
// through /proc/PID/map_files (the very file mapped, even when its path
// names another file here or none: a container's, a replaced one; root
// only), else through the process's root (OpenInRoot); nil when neither
// can be read.
func mappedBuildID(pid int, m mapping) []byte {
	files := []func() (*os.File, error){
		func() (*os.File, error) {
			return os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.start, m.end))
		},
		func() (*os.File, error) { return OpenInRoot(pid, m.name) },
	}
	for _, open := range files {
		f, err := open()
		if err != nil {
			continue
		}
		id, err := binfile.ReaderBuildID(m.name, f)
		f.Close()
		if err == nil && len(id) > 0 {
			return id
		}
	}
	return nil
}
