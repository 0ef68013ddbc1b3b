package recorder

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
