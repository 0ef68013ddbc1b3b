package recorder

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The ownership rules need two users. ResolveOutput takes the trusted
// uids as an argument, so a test run by any user stands in for "another
// user" by leaving its own uid out: me is this process's uid and other is
// a uid not trusted.
var (
	me    = os.Geteuid()
	other = 54321
)

// untrusted makes path another user's and returns the uids to trust: as
// root it chowns path to other; otherwise path is this user's, and only
// root is trusted.
func untrusted(t *testing.T, path string) []int {
	t.Helper()
	if me == 0 {
		if err := os.Lchown(path, other, other); err != nil {
			t.Fatal(err)
		}
	}
	return []int{0}
}

func trusted() []int { return []int{0, me} }

func resolveRefused(t *testing.T, path string, trusted []int, want string) {
	t.Helper()
	p, err := ResolveOutput(path, trusted)
	if err == nil {
		p.Close()
		t.Fatalf("-o %s: accepted (trusted %v); want refused with %q", path, trusted, want)
	}
	var refusal *OutputRefusal
	if !errors.As(err, &refusal) || !strings.Contains(err.Error(), want) {
		t.Fatalf("-o %s: %v; want a refusal with %q", path, err, want)
	}
}

func resolveOK(t *testing.T, path string, trusted []int) *OutputPath {
	t.Helper()
	p, err := ResolveOutput(path, trusted)
	if err != nil {
		t.Fatalf("-o %s: %v", path, err)
	}
	t.Cleanup(p.Close)
	return p
}

// fakeNull makes a character device like /dev/null (1,3) in dir: the
// device case without a real disk.
func fakeNull(t *testing.T, dir string) string {
	t.Helper()
	if me != 0 {
		t.Skip("not root: mknod of a character device needs root")
	}
	p := filepath.Join(dir, "null")
	if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod: %v", err)
	}
	return p
}

// TestResolveOutputOtherUsersLink: a link another user owns is never
// followed, at the output's name (to a device, a FIFO, a directory) or on
// the way to its directory; a trusted link to the same device is.
func TestResolveOutputOtherUsersLink(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	toFifo := filepath.Join(dir, "out.data")
	if err := os.Symlink(fifo, toFifo); err != nil {
		t.Fatal(err)
	}
	if p := resolveOK(t, toFifo, trusted()); p.Special == nil || p.Mode&os.ModeNamedPipe == 0 {
		t.Errorf("a trusted link to a FIFO: special %v mode %v; want the FIFO", p.Special, p.Mode)
	}
	resolveRefused(t, toFifo, untrusted(t, toFifo), "symbolic link owned by")

	// A directory on the way.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(dir, "proj")
	if err := os.Symlink(sub, proj); err != nil {
		t.Fatal(err)
	}
	if p := resolveOK(t, filepath.Join(proj, "x.data"), trusted()); p.Name != "x.data" || p.Special != nil {
		t.Errorf("through a trusted directory link: %+v", p)
	}
	resolveRefused(t, filepath.Join(proj, "x.data"), untrusted(t, proj), "proj is a symbolic link owned by")

	// At the output's name, leading to a regular file or nowhere: the
	// link is to be replaced by the new file, never written through.
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{target, filepath.Join(dir, "nothing")} {
		l := filepath.Join(dir, "l-"+filepath.Base(to))
		if err := os.Symlink(to, l); err != nil {
			t.Fatal(err)
		}
		p := resolveOK(t, l, untrusted(t, l))
		if p.Name != filepath.Base(l) || p.Mode != os.ModeSymlink || p.Special != nil {
			t.Errorf("-o %s: name %q mode %v; want the link itself, to be replaced", l, p.Name, p.Mode)
		}
	}

	// A link to a device: the issue's /tmp/fl_dev.data -> /dev/loop0.
	if me == 0 {
		null := fakeNull(t, dir)
		toDev := filepath.Join(dir, "fl_dev.data")
		if err := os.Symlink(null, toDev); err != nil {
			t.Fatal(err)
		}
		if p := resolveOK(t, toDev, trusted()); p.Special == nil || p.Mode&os.ModeCharDevice == 0 {
			t.Errorf("root's link to a device: %+v", p)
		}
		resolveRefused(t, toDev, untrusted(t, toDev), "to a character device: record does not write through another user's link")
	}
}

// TestResolveOutputOtherUsersSpecial: a FIFO or device that another user
// owns is refused even named directly; the caller's and root's are
// written into.
func TestResolveOutputOtherUsersSpecial(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fl_fifo.data")
	if err := unix.Mkfifo(fifo, 0o622); err != nil {
		t.Fatal(err)
	}
	if p := resolveOK(t, fifo, trusted()); p.Special == nil {
		t.Errorf("own FIFO: not special")
	}
	resolveRefused(t, fifo, untrusted(t, fifo), "is a FIFO owned by")
	if me == 0 {
		// Under sudo, the invoking user's FIFO is trusted.
		if p := resolveOK(t, fifo, []int{0, other}); p.Special == nil {
			t.Errorf("the sudo user's FIFO: not special")
		}
		null := fakeNull(t, dir)
		if p := resolveOK(t, null, trusted()); p.Special == nil || p.Mode&os.ModeCharDevice == 0 {
			t.Errorf("root's device: %+v", p)
		}
		resolveRefused(t, null, untrusted(t, null), "is a character device owned by")
	}
	p := resolveOK(t, "/dev/null", trusted())
	if p.Special == nil || p.Mode&os.ModeCharDevice == 0 {
		t.Errorf("/dev/null: %+v", p)
	}
}

// TestResolveOutputHardLinkedSpecial: a special file with a second name
// in a directory others can write is refused (someone may have linked it
// there); the same inode by its name in a directory only trusted users
// change is fine.
func TestResolveOutputHardLinkedSpecial(t *testing.T) {
	base := t.TempDir()
	safe := filepath.Join(base, "safe")
	open := filepath.Join(base, "open")
	for _, d := range []string{safe, open} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o1777); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(safe, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(open, "out.data")
	if err := os.Link(fifo, second); err != nil {
		t.Skipf("cannot hard-link a FIFO here: %v", err)
	}
	resolveRefused(t, second, trusted(), "with 2 names in a directory other users can write")
	resolveOK(t, fifo, trusted())
}

// TestResolveOutputHoldsTheInode: what is written is what was resolved,
// whatever the name is made to point at afterwards.
func TestResolveOutputHoldsTheInode(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := resolveOK(t, fifo, trusted())
	r, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The name now goes elsewhere.
	if err := os.Rename(fifo, fifo+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fifo, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := p.ReopenSpecial(0)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "to the fifo")
	w.Close()
	unix.SetNonblock(int(r.Fd()), false)
	b, _ := io.ReadAll(r)
	if string(b) != "to the fifo" {
		t.Errorf("the FIFO read %q", b)
	}
	if fi, _ := os.Stat(fifo); fi.Size() != 0 {
		t.Errorf("the file now at the name was written")
	}

	// The directory, too: renames happen in the directory resolved.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	p = resolveOK(t, filepath.Join(sub, "out.data"), trusted())
	os.Rename(sub, sub+".moved")
	os.Mkdir(sub, 0o755)
	if err := os.WriteFile(p.FinalName(), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sub+".moved", "out.data")); err != nil {
		t.Errorf("not written in the directory resolved: %v", err)
	}
}

// TestResolveOutputNames: directories, sockets and empty names are not
// outputs; /dev/stdout (root's link to /proc/self/fd/1) resolves to
// whatever standard output is.
func TestResolveOutputNames(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"", dir, dir + "/", dir + "/.", "/"} {
		if _, err := ResolveOutput(p, trusted()); err == nil {
			t.Errorf("-o %q accepted", p)
		}
	}
	sock := filepath.Join(dir, "sock")
	fd, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	resolveRefused(t, sock, trusted(), "is a socket")

	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(dir)
	if p := resolveOK(t, "rel.data", trusted()); p.Name != "rel.data" || p.Mode != 0 {
		t.Errorf("relative name: %+v", p)
	}

	// Standard output as a pipe of this process's own.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	p := resolveOK(t, "/proc/self/fd/"+strconv.Itoa(int(w.Fd())), trusted())
	if p.Mode&os.ModeNamedPipe == 0 {
		t.Errorf("/proc/self/fd/N of a pipe: mode %v", p.Mode)
	}
}
