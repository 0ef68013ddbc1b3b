package binfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// memFS is a fake file system: path -> contents. Symbolic links are
// modelled by putting the same contents under both names.
type memFS map[string][]byte

type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f memFile) Close() error               { return nil }
func (f memFile) Stat() (fs.FileInfo, error) { return memInfo{f.name, f.size}, nil }

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

func (m memFS) Open(name string) (File, error) {
	d, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return memFile{bytes.NewReader(d), name, int64(len(d))}, nil
}

func (m memFS) Stat(name string) (fs.FileInfo, error) {
	d, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return memInfo{name, int64(len(d))}, nil
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	d, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// fixtureIDs returns the build IDs of the fixtures, as readelf -n shows them.
func fixtureIDs(t *testing.T) (inline, cxx string) {
	t.Helper()
	for _, n := range []string{"inline", "cxx"} {
		f, err := openELFFile(osFS{}, "testdata/"+n)
		if err != nil {
			t.Fatal(err)
		}
		if n == "inline" {
			inline = f.buildID
		} else {
			cxx = f.buildID
		}
		f.close()
	}
	if len(inline) != 40 || len(cxx) != 40 {
		t.Fatalf("fixture build IDs %q %q", inline, cxx)
	}
	return
}

func TestLocate(t *testing.T) {
	full, stripped, debug, other := readFixture(t, "inline"), readFixture(t, "inline.stripped"), readFixture(t, "inline.debug"), readFixture(t, "cxx")
	bid, _ := fixtureIDs(t)
	const rec = "/opt/app/bin/inline"
	bidPath := bid[:2] + "/" + bid[2:]
	for _, tc := range []struct {
		name      string
		loc       Locator
		files     memFS
		buildID   string
		wantFile  string
		wantDebug string
		wantWarn  string // substring of a warning; "" means no warnings
	}{
		{name: "recorded path", files: memFS{rec: full}, buildID: bid, wantFile: rec, wantDebug: rec},
		{name: "symfs", loc: Locator{Symfs: "/sym"}, files: memFS{"/sym" + rec: full, rec: other}, buildID: bid,
			wantFile: "/sym" + rec, wantDebug: "/sym" + rec},
		{name: "symfs flat", loc: Locator{Symfs: "/sym"}, files: memFS{"/sym/inline": full}, buildID: bid,
			wantFile: "/sym/inline", wantDebug: "/sym/inline"},
		{name: "build-id cache first", loc: Locator{BuildIDDir: "/home/u/.debug"},
			files: memFS{"/home/u/.debug/.build-id/" + bidPath + "/elf": full, rec: other}, buildID: bid,
			wantFile: "/home/u/.debug/.build-id/" + bidPath + "/elf", wantDebug: "/home/u/.debug/.build-id/" + bidPath + "/elf"},
		{name: "old build-id cache", loc: Locator{BuildIDDir: "/c"},
			files: memFS{"/c/.build-id/" + bidPath: full}, buildID: bid,
			wantFile: "/c/.build-id/" + bidPath, wantDebug: "/c/.build-id/" + bidPath},
		{name: "mismatch skipped for a later match", loc: Locator{Symfs: "/sym", HostFallback: true},
			files: memFS{"/sym" + rec: other, rec: full}, buildID: bid, wantFile: rec, wantDebug: rec},
		{name: "mismatch used with warning when allowed", loc: Locator{AllowMismatch: true}, files: memFS{rec: other}, buildID: bid,
			wantFile: rec, wantDebug: rec, wantWarn: "used anyway (--allow-mismatch)"},
		{name: "no recorded build ID", files: memFS{rec: full}, wantFile: rec, wantDebug: rec},
		{name: "symfs only: mismatch used when allowed, host not searched", loc: Locator{Symfs: "/sym", AllowMismatch: true},
			files: memFS{"/sym" + rec: other, rec: full}, buildID: bid, wantFile: "/sym" + rec, wantDebug: "/sym" + rec, wantWarn: "is not the binary that ran"},
		{name: "mismatching binary refused, matching debug file names", loc: Locator{DebugDirs: []string{"/usr/lib/debug"}},
			files: memFS{rec: other, "/usr/lib/debug/.build-id/" + bidPath + ".debug": debug}, buildID: bid,
			wantDebug: "/usr/lib/debug/.build-id/" + bidPath + ".debug", wantWarn: "binary not found"},
		{name: "padded build ID", loc: Locator{Symfs: "/sym", HostFallback: true}, files: memFS{"/sym" + rec: other, rec: full}, buildID: strings.ToUpper(bid) + "00000000",
			wantFile: rec, wantDebug: rec},
		{name: "debuglink same dir", files: memFS{rec: stripped, "/opt/app/bin/inline.debug": debug}, buildID: bid,
			wantFile: rec, wantDebug: "/opt/app/bin/inline.debug"},
		{name: "debuglink .debug dir", files: memFS{rec: stripped, "/opt/app/bin/.debug/inline.debug": debug}, buildID: bid,
			wantFile: rec, wantDebug: "/opt/app/bin/.debug/inline.debug"},
		{name: "debuglink global dir", loc: Locator{DebugDirs: []string{"/usr/lib/debug"}},
			files: memFS{rec: stripped, "/usr/lib/debug/opt/app/bin/inline.debug": debug}, buildID: bid,
			wantFile: rec, wantDebug: "/usr/lib/debug/opt/app/bin/inline.debug"},
		{name: "debuglink CRC mismatch", loc: Locator{DebugDirs: []string{"/usr/lib/debug"}},
			files: memFS{rec: stripped, "/opt/app/bin/inline.debug": full}, buildID: bid,
			wantFile: rec, wantWarn: "no debug info"},
		{name: "build-id debug dir", loc: Locator{DebugDirs: []string{"/usr/lib/debug"}},
			files: memFS{rec: stripped, "/usr/lib/debug/.build-id/" + bidPath + ".debug": debug}, buildID: bid,
			wantFile: rec, wantDebug: "/usr/lib/debug/.build-id/" + bidPath + ".debug"},
		{name: "build-id debug dir under symfs", loc: Locator{Symfs: "/s", DebugDirs: []string{"/usr/lib/debug"}},
			files: memFS{"/s" + rec: stripped, "/s/usr/lib/debug/.build-id/" + bidPath + ".debug": debug,
				"/usr/lib/debug/.build-id/" + bidPath + ".debug": debug}, buildID: bid,
			wantFile: "/s" + rec, wantDebug: "/s/usr/lib/debug/.build-id/" + bidPath + ".debug"},
		{name: "build-id cache debug", loc: Locator{BuildIDDir: "/c"},
			files: memFS{rec: stripped, "/c/.build-id/" + bidPath + "/debug": debug}, buildID: bid,
			wantFile: rec, wantDebug: "/c/.build-id/" + bidPath + "/debug"},
		{name: "debuginfod cache", loc: Locator{DebuginfodCache: "/h/.cache/debuginfod_client"},
			files: memFS{rec: stripped, "/h/.cache/debuginfod_client/" + bid + "/debuginfo": debug}, buildID: bid,
			wantFile: rec, wantDebug: "/h/.cache/debuginfod_client/" + bid + "/debuginfo"},
		{name: "debug file of another build is refused", loc: Locator{DebugDirs: []string{"/usr/lib/debug"}},
			files: memFS{rec: stripped, "/usr/lib/debug" + rec + ".debug": other}, buildID: bid,
			wantFile: rec, wantWarn: "no debug info"},
		{name: "debug file only", loc: Locator{DebugDirs: []string{"/usr/lib/debug"}},
			files: memFS{"/usr/lib/debug/.build-id/" + bidPath + ".debug": debug}, buildID: bid,
			wantDebug: "/usr/lib/debug/.build-id/" + bidPath + ".debug", wantWarn: "binary not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.loc
			l.FS = tc.files
			b, err := l.Open(rec, tc.buildID)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.File != tc.wantFile || b.DebugFile != tc.wantDebug {
				t.Errorf("got file %q debug %q, want %q %q", b.File, b.DebugFile, tc.wantFile, tc.wantDebug)
			}
			warns := warningText(b.Warnings)
			if tc.wantWarn == "" && warns != "" || !strings.Contains(warns, tc.wantWarn) {
				t.Errorf("warnings %q, want %q", warns, tc.wantWarn)
			}
			// Whatever DWARF was found must name main.
			if tc.wantDebug == "" {
				return
			}
			if f := b.Symbolize(mainAddr(t, b), nil); f[len(f)-1].Func != "main" {
				t.Errorf("main's address named %+v", f)
			}
		})
	}
}

func mainAddr(t *testing.T, b *Binary) uint64 {
	t.Helper()
	for _, s := range b.symbols().syms {
		if s.name == "main" {
			return s.start + 1
		}
	}
	t.Fatalf("no main in %s", b.File)
	return 0
}

func TestLocateVDSO(t *testing.T) {
	_, bid := fixtureIDs(t) // any ELF stands in for the vdso
	vdso := readFixture(t, "cxx")
	l := Locator{BuildIDDir: "/root/.debug", FS: memFS{"/root/.debug/[vdso]/" + bid + "/vdso": vdso}}
	b, err := l.Open("[vdso]", bid)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.File != "/root/.debug/[vdso]/"+bid+"/vdso" {
		t.Errorf("vdso found at %q", b.File)
	}
	if _, err := l.Open("[vdso]", ""); err == nil {
		t.Error("[vdso] without build ID: no error")
	}
}

func TestLocateNotFiles(t *testing.T) {
	l := Locator{FS: memFS{}}
	for _, name := range []string{"[stack]", "[heap]", "//anon", "[uprobes]", "[vvar]", "/dev/zero (deleted)", "/memfd:x (deleted)", "[anon:glibc]"} {
		if _, err := l.Open(name, ""); !errors.Is(err, ErrNotFile) {
			t.Errorf("%s: got %v, want ErrNotFile", name, err)
		}
	}
}

func TestLocateMissing(t *testing.T) {
	l := Locator{Symfs: "/sym", BuildIDDir: "/root/.debug", DebugDirs: []string{"/usr/lib/debug"}, FS: memFS{}}
	_, err := l.Open(libcPath, "93ac61ec5a8eb1396f9fbd350e3169a558528a40")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want *NotFoundError", err)
	}
	msg := err.Error() + ". " + nf.Fix()
	for _, want := range []string{"/sym" + libcPath, "/root/.debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40/elf", "--symfs"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	// libc found (on the host: HostFallback) but not its debug file: the
	// warning says what to install.
	l.HostFallback = true
	l.FS = memFS{libcPath: readFixture(t, "inline.stripped")}
	b, err := l.Open(libcPath, "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var nd *NoDebugInfoError
	for _, w := range b.Warnings {
		if errors.As(w, &nd) {
			break
		}
	}
	if nd == nil || !strings.Contains(nd.Fix(), "libc6-dbg") {
		t.Errorf("warning %q does not say to install libc6-dbg", warningText(b.Warnings))
	}
}

func TestNewLocator(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	l := NewLocator("/sym/", func(k string) string { return env[k] })
	if l.Symfs != "/sym" || l.BuildIDDir != "/home/u/.debug" || l.DebuginfodCache != "/home/u/.cache/debuginfod_client" || len(l.DebugDirs) != 1 {
		t.Errorf("got %+v", l)
	}
	env["DEBUGINFOD_CACHE_PATH"] = "/d"
	env["PERF_BUILDID_DIR"] = "/b"
	l = NewLocator("", func(k string) string { return env[k] })
	if l.BuildIDDir != "/b" || l.DebuginfodCache != "/d" {
		t.Errorf("got %+v", l)
	}
}

// warningText is a Binary's warnings one per line ("" for none).
func warningText(ws []error) string {
	var lines []string
	for _, w := range ws {
		lines = append(lines, w.Error())
	}
	return strings.Join(lines, "\n")
}

// TestLocateRefusesMismatch: a file with another build ID than the
// recorded one (the fixtures' IDs as readelf -n prints them) is never
// used unless allowed; the error names it and says what to do.
func TestLocateRefusesMismatch(t *testing.T) {
	bid, otherID := fixtureIDs(t)
	const rec = "/opt/app/bin/inline"
	l := Locator{FS: memFS{rec: readFixture(t, "cxx")}, BuildIDDir: "/c"}
	_, err := l.Open(rec, bid)
	var me *MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("got %v, want a *MismatchError", err)
	}
	if me.File != rec || !strings.Contains(me.Why, otherID) || !strings.Contains(err.Error()+"; "+me.Fix(), "--allow-mismatch") {
		t.Errorf("error %q", err)
	}
	// Nothing at all is a NotFoundError still.
	l.FS = memFS{}
	if _, err := l.Open(rec, bid); !errors.As(err, new(*NotFoundError)) {
		t.Errorf("nothing found: %v", err)
	}
}

// TestLocateIdentity: without a build ID, the file at the recorded path
// must have the MMAP2 record's inode (from os.Stat here, as the
// kernel reports them for a mapping of that file); another inode is the
// file replaced since (a rebuild, a package upgrade).
func TestLocateIdentity(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "inline")
	if err := os.WriteFile(p, readFixture(t, "inline"), 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	l := Locator{}
	same := Key{Path: p, Ino: st.Ino, Dev: uint64(st.Dev)}
	b, err := l.openKey(same)
	if err != nil {
		t.Fatalf("same inode: %v", err)
	}
	b.Close()
	// The device alone does not decide (btrfs and overlayfs report
	// another one to stat than to MMAP2).
	b, err = l.openKey(Key{Path: p, Ino: st.Ino, Dev: uint64(st.Dev) + 1})
	if err != nil {
		t.Fatalf("same inode, other device: %v", err)
	}
	b.Close()
	// A mapping that reached past the file's last 64 KiB: ls -l's size
	// rounded up to 64 KiB, plus a page.
	end := (uint64(fi.Size()) + 0xffff) &^ 0xffff
	if b, err := l.openKey(Key{Path: p, Ino: st.Ino, MapEnd: end}); err != nil {
		t.Errorf("mapping to the file's end: %v", err)
	} else {
		b.Close()
	}
	keys := []Key{{Path: p, Ino: st.Ino + 1, Dev: uint64(st.Dev)}, {Path: p, Ino: st.Ino, MapEnd: end + 4096}}
	// The generation as lsattr -v prints it, where the file system has one.
	if out, err := exec.Command("lsattr", "-v", p).Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) > 0 {
			if gen, err := strconv.ParseUint(f[0], 10, 32); err == nil {
				if b, err := l.openKey(Key{Path: p, Ino: st.Ino, Gen: gen}); err != nil {
					t.Errorf("same generation %d: %v", gen, err)
				} else {
					b.Close()
				}
				keys = append(keys, Key{Path: p, Ino: st.Ino, Gen: gen + 1})
			}
		}
	} else {
		t.Logf("lsattr -v: %v: the generation is not checked here", err)
	}
	for _, k := range keys {
		_, err := l.openKey(k)
		var me *MismatchError
		if !errors.As(err, &me) || me.File != p {
			t.Errorf("%+v: got %v, want a *MismatchError", k, err)
		}
		l.AllowMismatch = true
		b, err := l.openKey(k)
		if err != nil {
			t.Fatalf("allowed: %v", err)
		}
		if w := warningText(b.Warnings); !strings.Contains(w, "used anyway") {
			t.Errorf("allowed: warnings %q", w)
		}
		b.Close()
		l.AllowMismatch = false
	}
}
