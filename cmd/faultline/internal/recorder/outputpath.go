package recorder

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// OutputPath is where a recording goes, found so that nobody but the
// trusted users (root and whoever ran record) can have steered it: every
// directory is held open, every symbolic link on the way was owned by a
// trusted user, and an existing FIFO or device at the end is a trusted
// user's. Callers create and rename inside Dir by name (DirName), or
// write into Special, and never look the path up again.
type OutputPath struct {
	// Dir is the directory the output's name is in (an O_PATH descriptor).
	Dir *os.File
	// Name is the output's last component in Dir: what a new file is
	// renamed to. A symbolic link there is replaced, never followed, unless
	// it led to Special.
	Name string
	// Special is the FIFO or device node the output names, or the
	// regular file a link of /proc's (/dev/stdout) leads to: an O_PATH
	// descriptor, which ReopenSpecial opens for writing. Nil otherwise.
	Special *os.File
	// Mode is the type of Special, os.ModeSymlink for a link at Name that
	// is to be replaced, and 0 for a regular file (Special or at Name) or
	// nothing there.
	Mode os.FileMode
}

// DirName is a path that reaches Dir without looking anything up again.
func (p *OutputPath) DirName() string { return fdPath(p.Dir) }

// FinalName is DirName joined with Name.
func (p *OutputPath) FinalName() string { return p.DirName() + "/" + p.Name }

// ReopenSpecial opens Special for writing with flags added to
// O_WRONLY|O_NOCTTY|O_CLOEXEC (O_NONBLOCK, say, for a FIFO nobody reads
// yet). The inode is the one resolved, whatever its name points at now.
func (p *OutputPath) ReopenSpecial(flags int) (*os.File, error) {
	fd, err := unix.Open(fdPath(p.Special), unix.O_WRONLY|unix.O_NOCTTY|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p.Special.Name()), nil
}

// Close closes the descriptors held.
func (p *OutputPath) Close() {
	p.Dir.Close()
	if p.Special != nil {
		p.Special.Close()
	}
}

func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// An OutputRefusal is an output record does not write: what is wrong with
// it and why.
type OutputRefusal struct {
	Path   string // as given
	Reason string
}

func (e *OutputRefusal) Error() string { return "-o " + e.Path + ": " + e.Reason }

// ResolveOutput looks up path, an output to be written by this process,
// one component at a time with O_PATH|O_NOFOLLOW. A symbolic link is
// followed only when one of the trusted uids owns it; another user's link
// on the way to the output's directory, or one at the output's name that
// leads to a FIFO, device or directory, is refused: as root, following it
// would write wherever that user chose (a disk, or a FIFO they read). An
// existing FIFO or device node is written into only when a trusted uid
// owns it, and, when it has more than one name, only in a directory only
// trusted uids can change. Links in /proc that are not paths
// (/proc/self/fd/1 when it is a pipe) are followed by the kernel. Refusals
// are *OutputRefusal.
func ResolveOutput(path string, trusted []int) (*OutputPath, error) {
	r := &resolver{given: path, trusted: trusted}
	p, err := r.resolve()
	if err != nil {
		var refusal *OutputRefusal
		if !errors.As(err, &refusal) {
			err = fmt.Errorf("looking up %s: %w", path, err)
		}
		return nil, err
	}
	return p, nil
}

// maxLinks bounds the links followed, as the kernel's MAXSYMLINKS.
const maxLinks = 40

type resolver struct {
	given   string
	trusted []int
	links   int
	// throughProc is set once a link of /proc's has been followed.
	throughProc bool
}

func (r *resolver) refuse(format string, args ...any) error {
	return &OutputRefusal{Path: r.given, Reason: fmt.Sprintf(format, args...)}
}

func (r *resolver) isTrusted(uid uint32) bool {
	for _, t := range r.trusted {
		if int(uid) == t {
			return true
		}
	}
	return false
}

func (r *resolver) resolve() (*OutputPath, error) {
	if r.given == "" {
		return nil, r.refuse("empty name")
	}
	parent, name := filepath.Split(r.given)
	if name == "" || name == "." || name == ".." {
		return nil, r.refuse("is a directory; name a file")
	}
	dir, err := openPath(unix.AT_FDCWD, ".", false)
	if err != nil {
		return nil, err
	}
	if dir, err = r.walk(dir, parent); err != nil {
		return nil, err
	}
	p, err := r.final(dir, name)
	if err != nil {
		dir.Close()
		return nil, err
	}
	return p, nil
}

// walk follows the components of rel from dir (which it consumes) and
// returns the directory they lead to.
func (r *resolver) walk(dir *os.File, rel string) (*os.File, error) {
	if strings.HasPrefix(rel, "/") {
		dir.Close()
		root, err := openPath(unix.AT_FDCWD, "/", false)
		if err != nil {
			return nil, err
		}
		dir = root
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." {
			continue
		}
		next, err := r.step(dir, c)
		dir.Close()
		if err != nil {
			return nil, err
		}
		dir = next
		var st unix.Stat_t
		if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
			dir.Close()
			return nil, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			dir.Close()
			return nil, r.refuse("%s is not a directory", c)
		}
	}
	return dir, nil
}

// step opens the component c of dir, following a trusted link to what it
// names.
func (r *resolver) step(dir *os.File, c string) (*os.File, error) {
	f, err := openPath(int(dir.Fd()), c, true)
	if err != nil {
		return nil, err
	}
	st, err := fstat(f)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		if err != nil {
			f.Close()
		}
		return f, err
	}
	defer f.Close()
	if !r.isTrusted(st.Uid) {
		return nil, r.refuse("%s is a symbolic link owned by %s, not by root or you: record does not follow another user's link, which could lead anywhere (a disk, a FIFO that user reads); name the real path", c, userName(st.Uid))
	}
	if r.links++; r.links > maxLinks {
		return nil, r.refuse("too many levels of symbolic links")
	}
	if onProc(dir) {
		// /proc's links (self, fd/N) may name no path; the kernel follows
		// them.
		r.throughProc = true
		return openPath(int(dir.Fd()), c, false)
	}
	target, err := readlink(f)
	if err != nil {
		return nil, err
	}
	tdir, tname := filepath.Split(target)
	d, err := openPath(int(dir.Fd()), ".", false)
	if err != nil {
		return nil, err
	}
	if d, err = r.walk(d, tdir); err != nil {
		return nil, err
	}
	defer d.Close()
	if tname == "" {
		return openPath(int(d.Fd()), ".", false)
	}
	return r.step(d, tname)
}

// final looks at the output's name in dir.
func (r *resolver) final(dir *os.File, name string) (*OutputPath, error) {
	p := &OutputPath{Dir: dir, Name: name}
	f, err := openPath(int(dir.Fd()), name, true)
	if errors.Is(err, unix.ENOENT) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := fstat(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		f.Close()
		return r.finalLink(p, st)
	}
	return r.finalNode(p, f, st, false)
}

// finalLink decides on a link at the output's name. One that leads to a
// regular file or nowhere is replaced by the new file, never written
// through; a trusted one is followed into a FIFO or device, and into
// whatever a link of /proc's names (/dev/stdout when the shell redirected
// it to a file: replacing /dev/stdout would break the system).
func (r *resolver) finalLink(p *OutputPath, link *unix.Stat_t) (*OutputPath, error) {
	if !r.isTrusted(link.Uid) {
		var target unix.Stat_t
		if err := unix.Stat(p.FinalName(), &target); err != nil || target.Mode&unix.S_IFMT == unix.S_IFREG {
			p.Mode = os.ModeSymlink
			return p, nil
		}
		return nil, r.refuse("%s is a symbolic link owned by %s, not by root or you, to a %s: record does not write through another user's link; name the %s itself, or remove the link", p.Name, userName(link.Uid), typeName(target.Mode), typeName(target.Mode))
	}
	r.throughProc = onProc(p.Dir)
	f, err := r.step(p.Dir, p.Name)
	if errors.Is(err, unix.ENOENT) && !r.throughProc {
		p.Mode = os.ModeSymlink // dangling
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := fstat(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && !r.throughProc {
		f.Close()
		p.Mode = os.ModeSymlink
		return p, nil
	}
	return r.finalNode(p, f, st, true)
}

// finalNode decides on what the output names, open as f: a regular file
// here is one reached through /proc, written in place.
func (r *resolver) finalNode(p *OutputPath, f *os.File, st *unix.Stat_t, viaLink bool) (*OutputPath, error) {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if !viaLink {
			f.Close()
			return p, nil
		}
	case unix.S_IFDIR:
		f.Close()
		return nil, r.refuse("is a directory; name a file")
	case unix.S_IFIFO, unix.S_IFCHR, unix.S_IFBLK:
	default:
		f.Close()
		return nil, r.refuse("is a %s, not a file, device or FIFO; name a file", typeName(st.Mode))
	}
	kind := typeName(st.Mode)
	if !r.isTrusted(st.Uid) {
		f.Close()
		return nil, r.refuse("is a %s owned by %s, not by root or you: record does not write into another user's %s (that user could read the recording); name a new file", kind, userName(st.Uid), kind)
	}
	if st.Nlink > 1 && !viaLink && !r.trustedDir(p.Dir) {
		f.Close()
		return nil, r.refuse("is a %s with %d names in a directory other users can write: one of them may have linked it there; name it where it was made", kind, st.Nlink)
	}
	p.Special, p.Mode = f, fileMode(st.Mode)
	return p, nil
}

// trustedDir reports whether only trusted users can change names in dir.
func (r *resolver) trustedDir(dir *os.File) bool {
	st, err := fstat(dir)
	return err == nil && r.isTrusted(st.Uid) && st.Mode&0o022 == 0
}

func openPath(dirfd int, name string, nofollow bool) (*os.File, error) {
	flags := unix.O_PATH | unix.O_CLOEXEC
	if nofollow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

func fstat(f *os.File) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return &st, nil
}

// readlink reads the link f (O_PATH|O_NOFOLLOW) itself.
func readlink(f *os.File) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(int(f.Fd()), "", buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: f.Name(), Err: err}
	}
	return string(buf[:n]), nil
}

func onProc(dir *os.File) bool {
	var fs unix.Statfs_t
	return unix.Fstatfs(int(dir.Fd()), &fs) == nil && fs.Type == unix.PROC_SUPER_MAGIC
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFLNK:
		return "symbolic link"
	}
	return "regular file"
}

func fileMode(mode uint32) os.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return os.ModeNamedPipe
	case unix.S_IFCHR:
		return os.ModeDevice | os.ModeCharDevice
	case unix.S_IFBLK:
		return os.ModeDevice
	}
	return 0
}

func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}
