package recorder

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A program's LD_PRELOAD names the shim by record's /proc/PID/fd entry,
// which only processes that may ptrace record can open: a child that
// dropped its privileges before an exec got the dynamic loader's "ERROR:
// ld.so: object ... cannot be preloaded" on its standard error, a change
// to the program's output. publicShim gives LD_PRELOAD a copy of the
// object any user can read instead (the shim is no secret; the rings stay
// unreachable to other users, so such a child runs unrecorded, silently,
// and the recorder names it: schema.PreloadCheck).

// shimCopy is a copy of the shim object: publicShim's in a directory
// of its own, or rootShim's in a directory of a process's root.
type shimCopy struct {
	dir  string
	path string   // as the process that loads it sees it
	lock *os.File // flock'ed while the copy is in use (removeStaleShims)
	at   *os.File // rootShim's: the directory that holds the copy
}

// shimDirPattern names the copies' directories.
const shimDirPattern = "faultline-shim-*"

// publicShim copies the object at src (the memfd's /proc entry) to
// libfaultline-shim.so in a new directory, mode 0711 (the file 0644),
// under the first of the temporary directories that every user can reach
// and that allows executable mappings; nil where none does.
func publicShim(src string) *shimCopy {
	for _, base := range shimDirs() {
		removeStaleShims(base)
		if c := copyShimTo(base, src); c != nil {
			return c
		}
	}
	return nil
}

func shimDirs() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range []string{os.TempDir(), "/tmp", "/dev/shm", "/var/tmp"} {
		if !seen[d] && usableShimDir(d) {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// usableShimDir reports whether every user can reach dir (each directory
// on its path searchable by others) and its filesystem lets a loader map
// files executable (no noexec).
func usableShimDir(dir string) bool {
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil || fs.Flags&unix.ST_NOEXEC != 0 {
		return false
	}
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if p == "/" {
			return true
		}
	}
}

func copyShimTo(base, src string) *shimCopy {
	dir, err := os.MkdirTemp(base, shimDirPattern) // 0700, a name of our own
	if err != nil {
		return nil
	}
	c := &shimCopy{dir: dir, path: filepath.Join(dir, "libfaultline-shim.so")}
	ok := false
	defer func() {
		if !ok {
			c.remove()
		}
	}()
	in, err := os.Open(src)
	if err != nil {
		return nil
	}
	defer in.Close()
	out, err := os.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err != nil || cerr != nil {
		return nil
	}
	if os.Chmod(c.path, 0o644) != nil || os.Chmod(dir, 0o711) != nil {
		return nil
	}
	if c.lock, err = os.Open(c.path); err != nil || unix.Flock(int(c.lock.Fd()), unix.LOCK_SH|unix.LOCK_NB) != nil {
		return nil
	}
	ok = true
	return c
}

// remove removes the copy and its directory.
func (c *shimCopy) remove() {
	if c == nil {
		return
	}
	if c.at != nil {
		unix.Unlinkat(int(c.at.Fd()), filepath.Base(c.path), 0)
		c.at.Close()
		*c = shimCopy{} // a second remove removes nothing
		return
	}
	if c.lock != nil {
		c.lock.Close()
	}
	os.Remove(c.path)
	os.Remove(c.dir)
}

// removeStaleShims removes the copies that runs of record killed before
// they finished left in base: directories of ours whose copy nobody holds
// locked.
func removeStaleShims(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "faultline-shim-") {
			continue
		}
		dir := filepath.Join(base, e.Name())
		var st unix.Stat_t
		if unix.Lstat(dir, &st) != nil || int(st.Uid) != os.Geteuid() {
			continue
		}
		path := filepath.Join(dir, "libfaultline-shim.so")
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if err == unix.ENOENT {
				os.Remove(dir) // empty: a copy that failed half-way
			}
			continue
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.Remove(path)
			os.Remove(dir)
		}
		unix.Close(fd)
	}
}

// withPublicShim returns env with the first LD_PRELOAD entry, the
// object's /proc path, replaced by the copy's path.
func withPublicShim(env []string, object string, c *shimCopy) []string {
	if c == nil {
		return env
	}
	out := make([]string, len(env))
	for i, e := range env {
		if v, ok := strings.CutPrefix(e, "LD_PRELOAD="); ok && strings.HasPrefix(v, object) {
			e = "LD_PRELOAD=" + c.path + v[len(object):]
		}
		out[i] = e
	}
	return out
}
