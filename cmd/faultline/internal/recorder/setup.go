package recorder

import (
	"bytes"
	"errors"
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/faultline/faultline/cmd/faultline/internal/libc"
	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
)

// The recording methods, as --method names them.
const (
	MethodAuto      = "auto"
	MethodInProcess = "inproc"
	MethodUprobes   = "uprobe"
)

// MethodRequest is what the choice of a recording method looks at.
type MethodRequest struct {
	Method string // MethodAuto, MethodInProcess or MethodUprobes
	Cmd    string // the command's resolved path ("" without one)
	Pid    int    // a running process (-p)
	All    bool   // system-wide (-a)
	Libc   string // the library to probe, when named (--libc)
}

// MethodError is a method asked for that cannot record what was asked.
type MethodError struct{ Msg string }

func (e *MethodError) Error() string { return e.Msg }

// ChooseMethod picks the recording method for req and says why (""
// when the in-process method is simply the default). A method asked for
// that cannot record the target is a *MethodError.
func ChooseMethod(sys System, req MethodRequest) (method, why string, err error) {
	switch req.Method {
	case MethodUprobes:
		return MethodUprobes, "as asked (--method uprobe)", nil
	case MethodInProcess:
		switch {
		case req.Cmd == "":
			return "", "", &MethodError{"--method inproc records a command it starts, not -p or -a"}
		case !shim.Supported():
			return "", "", &MethodError{"--method inproc: the allocator shim is built for x86-64 only"}
		}
		if ok, why := libc.Preloadable(sys, req.Cmd); !ok {
			return "", "", &MethodError{fmt.Sprintf("--method inproc: %s; use --method uprobe", why)}
		}
		return MethodInProcess, "as asked (--method inproc)", nil
	}
	switch {
	case req.Pid > 0:
		return MethodUprobes, "a running process (-p) cannot be preloaded", nil
	case req.All:
		return MethodUprobes, "system-wide (-a) recording probes every process", nil
	case req.Libc != "":
		return MethodUprobes, "--libc names the library to probe", nil
	case !shim.Supported():
		return MethodUprobes, "the allocator shim is built for x86-64 only", nil
	}
	if ok, why := libc.Preloadable(sys, req.Cmd); !ok {
		return MethodUprobes, why, nil
	}
	// A shared allocator with entry points of its own (operator new and
	// delete, mallocx, tc_new, mi_zalloc) gets the shim object of its
	// family (shim.ObjectFor), which records those too.
	return MethodInProcess, "", nil
}

// CheckExecutable refuses what execve(2) would refuse with EACCES or
// ENOEXEC, before any probe is added: a file that is not regular, has no
// execute permission, or is neither ELF nor a #! script.
func CheckExecutable(sys System, path string) error {
	regular, err := sys.IsRegular(path)
	if err != nil {
		return err
	}
	if !regular {
		return errors.New("not a regular file")
	}
	if err := sys.Executable(path); err != nil {
		return fmt.Errorf("no execute permission (%v); chmod +x it", err)
	}
	f, err := sys.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var head [4]byte
	n, _ := f.ReadAt(head[:], 0)
	if !bytes.HasPrefix(head[:n], []byte("\x7fELF")) && !bytes.HasPrefix(head[:n], []byte("#!")) {
		return errors.New("neither an ELF binary nor a #! script")
	}
	return nil
}

// CheckUprobePrivileges reports whether this process may add uprobes:
// only root may write uprobe_events.
func CheckUprobePrivileges(sys System) error {
	if sys.Geteuid() == 0 {
		return nil
	}
	return fmt.Errorf("must run as root: adding uprobes writes /sys/kernel/tracing/uprobe_events, which only root may do (perf_event_paranoid is %s)", Paranoid(sys))
}

// Paranoid is /proc/sys/kernel/perf_event_paranoid's value, or "unknown".
func Paranoid(sys System) string {
	if b, err := sys.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "unknown"
}

// THPEnabled reports whether transparent huge pages are on for every
// process ("[always]").
func THPEnabled(sys System) bool {
	b, err := sys.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && bytes.Contains(b, []byte("[always]"))
}

// AllocatorRequest says whose allocator a recording probes.
type AllocatorRequest struct {
	Libc string // named (--libc): probed as it is
	Pid  int    // a running process's (-p)
	Cmd  string // the command's resolved path; "" (-a): /bin/sh's
}

// FindAllocator returns the object whose allocator the uprobe method
// probes: req.Libc, the allocator of the process (libc.ForProcessAllocator),
// the object the command's malloc binds to (libc.FindAllocator: an
// LD_PRELOADed allocator, the program itself, a DT_NEEDED library, with
// the environment the command inherits), or /bin/sh's for -a without a
// command; and the allocator, where it was looked up (nil for Libc).
func FindAllocator(sys System, req AllocatorRequest) (string, *libc.Allocator, error) {
	if req.Libc != "" {
		if !sys.Exists(req.Libc) {
			return "", nil, fmt.Errorf("--libc %s: no such file", req.Libc)
		}
		return req.Libc, nil, nil
	}
	if req.Pid > 0 {
		a, err := libc.ForProcessAllocator(sys, req.Pid)
		if err != nil {
			return "", nil, err
		}
		return a.Path, a, nil
	}
	target := req.Cmd
	if target == "" {
		p, err := libc.ResolveCommand(sys, "/bin/sh")
		if err != nil {
			return "", nil, err
		}
		target = p
	}
	a, err := libc.FindAllocator(sys, target, sys.Getenv("LD_PRELOAD"))
	if err != nil {
		return "", nil, err
	}
	return a.Path, a, nil
}

// BuildIDCacheFor is where a recording's binaries go: $PERF_BUILDID_DIR,
// else ~/.debug of the user who ran sudo (owning what is created), else
// $HOME/.debug; maxBytes bounds what one recording adds.
func BuildIDCacheFor(sys System, maxBytes int64) (*BuildIDCache, error) {
	c := &BuildIDCache{UID: -1, GID: -1, MaxBytes: maxBytes}
	if uid, err := strconv.Atoi(sys.Getenv("SUDO_UID")); err == nil && uid != 0 && sys.Geteuid() == 0 {
		u, err := user.LookupId(strconv.Itoa(uid))
		if err != nil {
			return nil, fmt.Errorf("the sudo user (uid %d) has no home directory to hold the build-id cache: %v", uid, err)
		}
		c.UID, c.GID = uid, -1
		if gid, err := strconv.Atoi(sys.Getenv("SUDO_GID")); err == nil {
			c.GID = gid
		}
		c.Dir = filepath.Join(u.HomeDir, ".debug")
	} else if h := sys.Getenv("HOME"); h != "" {
		c.Dir = filepath.Join(h, ".debug")
	}
	if d := sys.Getenv("PERF_BUILDID_DIR"); d != "" {
		c.Dir = d
	}
	if c.Dir == "" {
		return nil, fmt.Errorf("no home directory for the build-id cache (set HOME or PERF_BUILDID_DIR)")
	}
	return c, nil
}
