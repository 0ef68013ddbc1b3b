package recorder

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRootShimIn writes the shim's copy into a directory of a root as
// rootShim does into a container's: only into a sticky directory every
// user may write to, reached without symbolic links, as a new file of
// mode 0444 that remove unlinks.
func TestRootShimIn(t *testing.T) {
	root := t.TempDir()
	for dir, mode := range map[string]os.FileMode{"open": 0o777 | os.ModeSticky, "private": 0o755, "unsticky": 0o777} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(root, dir), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("open", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rootfd)
	obj := []byte("\x7fELF not really")

	for _, dir := range []string{"/private", "/unsticky", "/link", "/missing"} {
		if c, err := rootShimIn(rootfd, dir, obj); err == nil {
			c.remove()
			t.Errorf("rootShimIn(%s) wrote %s, want a refusal", dir, c.path)
		}
	}
	c, err := rootShimIn(rootfd, "/open", obj)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.path, "/open/libfaultline-shim-") {
		t.Errorf("the copy's path %q is not as the root's processes see it", c.path)
	}
	host := filepath.Join(root, c.path)
	fi, err := os.Lstat(host)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o444 {
		t.Errorf("the copy's mode is %v, want a file of mode 0444", fi.Mode())
	}
	if got, err := os.ReadFile(host); err != nil || !bytes.Equal(got, obj) {
		t.Errorf("the copy holds %q (%v), want %q", got, err, obj)
	}
	c.remove()
	if _, err := os.Lstat(host); !os.IsNotExist(err) {
		t.Errorf("after remove: %v, want the copy gone", err)
	}
	c.remove() // twice: no effect
}

// TestRemoveStaleRootShims: of the shim's copies in a container's /tmp,
// only those of record's user, mode 0444, older than staleAfter are
// removed; a fresh copy (an attach under way), another user's file, a
// file of another mode or name, and a symbolic link stay.
func TestRemoveStaleRootShims(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * staleAfter)
	mk := func(name string, mode os.FileMode, mtime time.Time) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := mk(rootShimPrefix+"0011223344556677.so", 0o444, old)
	fresh := mk(rootShimPrefix+"8899aabbccddeeff.so", 0o444, time.Now())
	writable := mk(rootShimPrefix+"1111111111111111.so", 0o644, old)
	other := mk("libother.so", 0o444, old)
	link := filepath.Join(dir, rootShimPrefix+"2222222222222222.so")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	keep := []string{fresh, writable, other, link}
	if os.Geteuid() == 0 {
		foreign := mk(rootShimPrefix+"3333333333333333.so", 0o444, old)
		if err := os.Lchown(foreign, 1, 1); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, foreign)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	removeStaleRootShims(fd, time.Now())
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale copy: %v, want it removed", err)
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v, want it kept", filepath.Base(p), err)
		}
	}
}
