package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/libc"
	"golang.org/x/sys/unix"
)

// System is the outside world a recording's setup reaches (method choice,
// privileges, tracefs, the allocator, the output, the build-id cache); the
// command's tests substitute a fake. libc.System holds the file and
// command access (LookPath, Run, ReadFile, Open, Exists, Inode, Getenv).
type System interface {
	libc.System
	// AppendLine writes line to path in one write(2), as tracefs control
	// files want.
	AppendLine(path, line string) error
	Geteuid() int
	Getpid() int
	MountTracefs(dir string) error
	// Fchown hands an open file to uid:gid (gid -1 keeps the group).
	Fchown(f *os.File, uid, gid int) error
	// ProcessAlive reports whether a process with this pid exists.
	ProcessAlive(pid int) bool
	// IsRegular reports whether path (symlinks followed) is a regular file.
	IsRegular(path string) (bool, error)
	// Executable reports, as access(2) with X_OK, whether this process may
	// execute path.
	Executable(path string) error
}

// OS is the System of the machine itself.
type OS struct{}

func (OS) LookPath(file string) (string, error) { return exec.LookPath(file) }

func (OS) Run(name string, args ...string) ([]byte, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	c := exec.CommandContext(ctx, name, args...)
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	return out.Bytes(), errb.Bytes(), err
}

func (OS) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

func (OS) Open(path string) (libc.File, error) { return os.Open(path) }

func (OS) AppendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(line + "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (OS) Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (OS) Inode(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no inode", path)
	}
	return st.Ino, nil
}

func (OS) Geteuid() int { return os.Geteuid() }
func (OS) Getpid() int  { return os.Getpid() }

func (OS) MountTracefs(dir string) error {
	return unix.Mount("nodev", dir, "tracefs", 0, "")
}

func (OS) Getenv(key string) string { return os.Getenv(key) }

func (OS) Fchown(f *os.File, uid, gid int) error { return f.Chown(uid, gid) }

func (OS) ProcessAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

func (OS) Executable(path string) error { return unix.Access(path, unix.X_OK) }

func (OS) IsRegular(path string) (bool, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	return fi.Mode().IsRegular(), nil
}
