package libc

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fakeSystem serves a virtual file system: virtual paths map to real files
// (for ELF contents) or to literal contents.
type fakeSystem struct {
	files  map[string]string // virtual path → real file
	text   map[string]string // virtual path → contents
	inodes map[string]uint64
	env    map[string]string
	ldconf string // `ldconfig -p` output; "" means no ldconfig
	path   map[string]string
}

func (f *fakeSystem) LookPath(file string) (string, error) {
	if file == "ldconfig" && f.ldconf != "" {
		return "/sbin/ldconfig", nil
	}
	if p, ok := f.path[file]; ok {
		return p, nil
	}
	return "", errors.New("not found")
}

func (f *fakeSystem) Run(name string, args ...string) ([]byte, []byte, error) {
	if name == "/sbin/ldconfig" {
		return []byte(f.ldconf), nil, nil
	}
	return nil, nil, errors.New("unexpected command " + name)
}

func (f *fakeSystem) ReadFile(path string) ([]byte, error) {
	if t, ok := f.text[path]; ok {
		return []byte(t), nil
	}
	if r, ok := f.files[path]; ok {
		return os.ReadFile(r)
	}
	return nil, fs.ErrNotExist
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func (f *fakeSystem) Open(path string) (File, error) {
	if t, ok := f.text[path]; ok {
		return nopCloser{bytes.NewReader([]byte(t))}, nil
	}
	if r, ok := f.files[path]; ok {
		return os.Open(r)
	}
	return nil, fs.ErrNotExist
}

func (f *fakeSystem) Exists(path string) bool {
	_, a := f.files[path]
	_, b := f.text[path]
	return a || b
}

func (f *fakeSystem) Inode(path string) (uint64, error) {
	if n, ok := f.inodes[path]; ok {
		return n, nil
	}
	return 0, fs.ErrNotExist
}

func (f *fakeSystem) Getenv(key string) string { return f.env[key] }

// realLibc is the libc /bin/true loads, as ldd (the loader itself) says.
func realLibc(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ldd", "/bin/true").Output()
	if err != nil {
		t.Skipf("ldd /bin/true: %v", err)
	}
	m := regexp.MustCompile(`libc\.so\.6 => (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Skipf("ldd /bin/true names no libc.so.6:\n%s", out)
	}
	p, err := filepath.EvalSymlinks(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestForBinaryMatchesLdd(t *testing.T) {
	want := realLibc(t)
	got, err := ForBinary(realSys{}, "/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("ForBinary(/bin/true) = %s, ldd says %s", got, want)
	}
	// A script runs its interpreter's libc.
	script := filepath.Join(t.TempDir(), "s.sh")
	os.WriteFile(script, []byte("#!/usr/bin/env sh\necho hi\n"), 0o755)
	if got, err := ForBinary(realSys{}, script); err != nil || got != want {
		t.Errorf("ForBinary(script) = %s, %v; want %s", got, err, want)
	}
}

func TestForBinarySearchOrder(t *testing.T) {
	libc := realLibc(t)
	base := func() *fakeSystem {
		return &fakeSystem{
			files: map[string]string{"/opt/app/prog": "/bin/true"},
			text:  map[string]string{},
			env:   map[string]string{},
		}
	}
	// LD_LIBRARY_PATH comes before the cache.
	f := base()
	f.files["/opt/lib/libc.so.6"] = libc
	f.files["/cache/libc.so.6"] = libc
	f.env["LD_LIBRARY_PATH"] = "/nowhere:/opt/lib"
	f.ldconf = "2 libs found in cache `/etc/ld.so.cache'\n\tlibc.so.6 (libc6,x86-64) => /cache/libc.so.6\n"
	if got, err := ForBinary(f, "/opt/app/prog"); err != nil || got != "/opt/lib/libc.so.6" {
		t.Errorf("with LD_LIBRARY_PATH: %s, %v", got, err)
	}
	// Then the cache; a candidate that is not ELF is skipped.
	f = base()
	f.text["/cache32/libc.so.6"] = "not elf"
	f.files["/cache/libc.so.6"] = libc
	f.ldconf = "\tlibc.so.6 (libc6) => /cache32/libc.so.6\n\tlibc.so.6 (libc6,x86-64) => /cache/libc.so.6\n"
	if got, err := ForBinary(f, "/opt/app/prog"); err != nil || got != "/cache/libc.so.6" {
		t.Errorf("from the cache: %s, %v", got, err)
	}
	// Nowhere: the error says how to name it.
	f = base()
	if _, err := ForBinary(f, "/opt/app/prog"); err == nil || !strings.Contains(err.Error(), "--libc") {
		t.Errorf("missing libc: err = %v", err)
	}
	// Not a program.
	f = base()
	f.text["/opt/app/data"] = "hello"
	if _, err := ForBinary(f, "/opt/app/data"); err == nil || !strings.Contains(err.Error(), "not a program") {
		t.Errorf("non-ELF: err = %v", err)
	}
}

func TestForBinaryStatic(t *testing.T) {
	// A Go program built without cgo has no PT_INTERP and no DT_NEEDED.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nfunc main() {}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module static\n"), 0o644)
	bin := filepath.Join(dir, "static")
	cmd := exec.Command(goTool, "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("go build: %v\n%s", err, out)
	}
	if _, err := ForBinary(realSys{}, bin); err == nil || !strings.Contains(err.Error(), "statically linked") {
		t.Errorf("static binary: err = %v", err)
	}
}

func TestParseLdconfig(t *testing.T) {
	out := "1176 libs found in cache `/etc/ld.so.cache'\n" +
		"\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6\n" +
		"\tlibc.so.6 (libc6) => /lib/i386-linux-gnu/libc.so.6\n" +
		"\tlibm.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libm.so.6\n" +
		"Cache generated by: ldconfig (GNU libc) stable release version 2.36\n"
	m := ParseLdconfig(out)
	if got := strings.Join(m["libc.so.6"], " "); got != "/lib/x86_64-linux-gnu/libc.so.6 /lib/i386-linux-gnu/libc.so.6" {
		t.Errorf("libc.so.6: %s", got)
	}
	if len(m) != 2 {
		t.Errorf("%d names: %v", len(m), m)
	}
}

func TestIsLibcName(t *testing.T) {
	for name, want := range map[string]bool{
		"libc.so.6": true, "libc-2.31.so": true, "libc.musl-x86_64.so.1": true, "libc.so": true,
		"libcrypt.so.1": false, "libc++.so.1": false, "libcap.so.2": false, "libc.so.6.bak~": false,
	} {
		if IsLibcName(name) != want {
			t.Errorf("IsLibcName(%q) = %v", name, !want)
		}
	}
}

const maps = `55d0c8a00000-55d0c8a02000 r--p 00000000 fe:01 1311 /usr/bin/sleep
7f1e2a400000-7f1e2a426000 r--p 00000000 fe:01 4242 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1e2a426000-7f1e2a57b000 r-xp 00026000 fe:01 4242 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1c9e7000-7ffd1ca08000 rw-p 00000000 00:00 0 [stack]
`

func TestForProcess(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	f := &fakeSystem{text: map[string]string{"/proc/42/maps": maps}, inodes: map[string]uint64{libc: 4242}}
	if got, err := ForProcess(f, 42); err != nil || got != libc {
		t.Errorf("same file system: %s, %v", got, err)
	}
	// In a container: our libc is another file; go through /proc/PID/root.
	f.inodes[libc] = 99
	f.text["/proc/42/root"+libc] = "elf"
	if got, err := ForProcess(f, 42); err != nil || got != "/proc/42/root"+libc {
		t.Errorf("other mount namespace: %s, %v", got, err)
	}
	if _, err := ForProcess(f, 7); err == nil || err.Error() != "no process 7" {
		t.Errorf("no process: %v", err)
	}
	f.text["/proc/43/maps"] = strings.ReplaceAll(maps, "libc.so.6", "libc.so.6 (deleted)")
	if _, err := ForProcess(f, 43); err == nil || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("deleted libc: %v", err)
	}
	f.text["/proc/44/maps"] = "55d0c8a00000-55d0c8a02000 r-xp 00000000 fe:01 1311 /usr/bin/static\n"
	if _, err := ForProcess(f, 44); err == nil || !strings.Contains(err.Error(), "--libc") {
		t.Errorf("no libc: %v", err)
	}
}

// TestOpenOffsets checks symbol file offsets against readelf (binutils):
// for the symbol's PT_LOAD, offset = value - p_vaddr + p_offset.
func TestOpenOffsets(t *testing.T) {
	libc := realLibc(t)
	out, err := exec.Command("readelf", "-W", "--dyn-syms", "-l", libc).Output()
	if err != nil {
		t.Skipf("readelf: %v", err)
	}
	var loads [][3]uint64 // offset, vaddr, memsz of executable segments
	for _, m := range regexp.MustCompile(`(?m)^\s*LOAD\s+0x([0-9a-f]+) 0x([0-9a-f]+) 0x[0-9a-f]+ 0x[0-9a-f]+ 0x([0-9a-f]+) R E`).FindAllSubmatch(out, -1) {
		var v [3]uint64
		for i := range v {
			v[i], _ = strconv.ParseUint(string(m[i+1]), 16, 64)
		}
		loads = append(loads, v)
	}
	m := regexp.MustCompile(`(?m)^\s*\d+: ([0-9a-f]+)\s+\d+ FUNC\s+\w+\s+\w+\s+\d+ malloc@`).FindSubmatch(out)
	if m == nil || len(loads) == 0 {
		t.Skipf("readelf output not understood")
	}
	value, _ := strconv.ParseUint(string(m[1]), 16, 64)
	var want uint64
	for _, l := range loads {
		if value >= l[1] && value < l[1]+l[2] {
			want = value - l[1] + l[0]
		}
	}
	lib, err := Open(realSys{}, libc)
	if err != nil {
		t.Fatal(err)
	}
	got, sym, ok := lib.Offset("nonexistent_function", "malloc")
	if !ok || got != want || sym != "malloc" {
		t.Errorf("malloc offset = %#x (%s, %v), readelf says %#x", got, sym, ok, want)
	}
}

// realSys is the real file system, for tests against this machine's files.
type realSys struct{}

func (realSys) LookPath(file string) (string, error) { return exec.LookPath(file) }
func (realSys) Run(name string, args ...string) ([]byte, []byte, error) {
	out, err := exec.Command(name, args...).Output()
	return out, nil, err
}
func (realSys) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }
func (realSys) Open(path string) (File, error)       { return os.Open(path) }
func (realSys) Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
func (realSys) Inode(path string) (uint64, error) { return 0, errors.New("unused") }
func (realSys) Getenv(key string) string          { return os.Getenv(key) }
