package recorder

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize/binfile"
)

// cacheFixture copies binfile's committed test binary to a directory of
// its own and returns its path and build ID.
func cacheFixture(t *testing.T) (string, []byte, []byte) {
	t.Helper()
	data, err := os.ReadFile("../../../../symbolize/binfile/testdata/inline")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "bin", "prog")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := binfile.FileBuildID(p)
	if err != nil || len(id) != 20 {
		t.Fatalf("build ID: %x %v", id, err)
	}
	return p, id, data
}

// TestBuildIDCacheLayout: the layout perf 6.1 writes (seen in a
// HOME=DIR perf record run: DIR/.debug/.build-id/93/ac61… ->
// ../../usr/lib/x86_64-linux-gnu/libc.so.6/93ac61…, holding elf), which
// binfile.Locator reads back; a second run finds it present.
func TestBuildIDCacheLayout(t *testing.T) {
	prog, id, data := cacheFixture(t)
	bid := hex.EncodeToString(id)
	dir := filepath.Join(t.TempDir(), ".debug")
	c := &BuildIDCache{Dir: dir, UID: -1, GID: -1, MaxBytes: 1 << 30}
	ids := []perfdata.BuildID{{ID: id, Filename: prog}, {ID: id, Filename: "[vdso]"}}
	rep, err := c.Add(ids)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Added != 1 || rep.Bytes != int64(len(data)) || len(rep.Skipped) != 0 {
		t.Fatalf("report %+v", rep)
	}
	elf := filepath.Join(dir, prog, bid, "elf")
	if got, err := os.ReadFile(elf); err != nil || !bytes.Equal(got, data) {
		t.Errorf("%s: %d bytes, %v", elf, len(got), err)
	}
	link := filepath.Join(dir, ".build-id", bid[:2], bid[2:])
	if target, err := os.Readlink(link); err != nil || target != "../.."+prog+"/"+bid {
		t.Errorf("link %s -> %q (%v)", link, target, err)
	}
	l := binfile.Locator{BuildIDDir: dir}
	b, err := l.Open("/gone/prog", bid)
	if err != nil {
		t.Fatalf("the locator does not find it: %v", err)
	}
	if b.File != link+"/elf" {
		t.Errorf("found %s", b.File)
	}
	b.Close()
	if rep, err = c.Add(ids); err != nil || rep.Present != 1 || rep.Added != 0 {
		t.Errorf("second run: %+v %v", rep, err)
	}
}

// TestBuildIDCacheRefuses: a file replaced since it ran, a binary over the
// bound, and a symbolic link planted in the cache are each skipped, and
// nothing is written through the link.
func TestBuildIDCacheRefuses(t *testing.T) {
	prog, id, data := cacheFixture(t)
	dir := filepath.Join(t.TempDir(), ".debug")
	other := append([]byte(nil), id...)
	other[0] ^= 0xff
	c := &BuildIDCache{Dir: dir, UID: -1, GID: -1, MaxBytes: 1 << 30}
	rep, err := c.Add([]perfdata.BuildID{{ID: other, Filename: prog}})
	if err != nil || rep.Added != 0 || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], "replaced since it ran") {
		t.Errorf("replaced: %+v %v", rep, err)
	}
	c.MaxBytes = int64(len(data)) - 1
	rep, err = c.Add([]perfdata.BuildID{{ID: id, Filename: prog}})
	if err != nil || rep.Added != 0 || rep.OverBudget != 1 || rep.OverBudgetBytes != int64(len(data)) {
		t.Errorf("over the bound: %+v %v", rep, err)
	}
	if _, err := os.Stat(filepath.Join(dir, prog, hex.EncodeToString(id), "elf")); err == nil {
		t.Error("over the bound but copied")
	}

	victim := t.TempDir()
	first := strings.Split(strings.TrimPrefix(prog, "/"), "/")[0]
	os.RemoveAll(filepath.Join(dir, first))
	if err := os.Symlink(victim, filepath.Join(dir, first)); err != nil {
		t.Fatal(err)
	}
	c.MaxBytes = 1 << 30
	rep, err = c.Add([]perfdata.BuildID{{ID: id, Filename: prog}})
	if err != nil || rep.Added != 0 || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], "symbolic link") {
		t.Errorf("planted link: %+v %v", rep, err)
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 0 {
		t.Errorf("written through the link: %v", ents)
	}
}

// TestBuildIDCacheOwner: as root, what Add creates belongs to the user it
// is told (the one who ran sudo).
func TestBuildIDCacheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	prog, id, _ := cacheFixture(t)
	home := t.TempDir()
	if err := os.Chown(home, 4242, 4243); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, ".debug")
	c := &BuildIDCache{Dir: dir, UID: 4242, GID: 4243, MaxBytes: 1 << 30}
	if rep, err := c.Add([]perfdata.BuildID{{ID: id, Filename: prog}}); err != nil || rep.Added != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	n := 0
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 4242 || st.Gid != 4243 {
			t.Errorf("%s: owned by %d:%d", p, st.Uid, st.Gid)
		}
		n++
		return nil
	})
	if err != nil || n < 5 {
		t.Errorf("walked %d entries: %v", n, err)
	}

	// An execute-only binary of root's is not copied for another user.
	if err := os.Chmod(prog, 0o711); err != nil {
		t.Fatal(err)
	}
	c.Dir = filepath.Join(home, "other")
	rep, err := c.Add([]perfdata.BuildID{{ID: id, Filename: prog}})
	if err != nil || rep.Added != 0 || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], "not readable by uid 4242") {
		t.Errorf("execute-only: %+v %v", rep, err)
	}
}
