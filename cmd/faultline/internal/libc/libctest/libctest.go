// Package libctest holds what tests of package libc and of its users share:
// a virtual file tree for a fake libc.System, and this machine's own libc.
// It does not import libc, so that libc's own tests can use it.
package libctest

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// Files is the file tree of a fake libc.System: a virtual path maps to
// literal contents (Text) or to a real file it reads through (Real, for ELF
// contents). Text wins where both name a path; a nil map holds nothing.
type Files struct {
	Text map[string]string // virtual path → contents
	Real map[string]string // virtual path → real file
}

// File is an open file: libc.File's methods.
type File interface {
	io.ReaderAt
	io.Closer
}

// ReadFile returns a path's contents, fs.ErrNotExist for a path not in f.
func (f *Files) ReadFile(path string) ([]byte, error) {
	if t, ok := f.Text[path]; ok {
		return []byte(t), nil
	}
	if r, ok := f.Real[path]; ok {
		return os.ReadFile(r)
	}
	return nil, fs.ErrNotExist
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// Open opens a path for random access, fs.ErrNotExist for a path not in f.
func (f *Files) Open(path string) (File, error) {
	if t, ok := f.Text[path]; ok {
		return nopCloser{bytes.NewReader([]byte(t))}, nil
	}
	if r, ok := f.Real[path]; ok {
		return os.Open(r)
	}
	return nil, fs.ErrNotExist
}

// Exists reports whether f holds path.
func (f *Files) Exists(path string) bool {
	_, a := f.Text[path]
	_, b := f.Real[path]
	return a || b
}

// SystemLibc returns the libc /bin/true loads on this machine, as ldd (the
// loader itself) names it, with symbolic links resolved. It skips tb where
// ldd cannot run or names no libc.so.6 (a musl or static system).
func SystemLibc(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command("ldd", "/bin/true").Output()
	if err != nil {
		tb.Skipf("ldd /bin/true: %v", err)
	}
	m := regexp.MustCompile(`libc\.so\.6 => (\S+)`).FindSubmatch(out)
	if m == nil {
		tb.Skipf("ldd /bin/true names no libc.so.6:\n%s", out)
	}
	p, err := filepath.EvalSymlinks(string(m[1]))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
