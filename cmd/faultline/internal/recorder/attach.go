package recorder

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/internal/inject"
	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"golang.org/x/sys/unix"
)

// AttachSource records the allocator calls of a running process
// (Config.Pid) in process, as InProcessSource records a command it
// starts: one of the process's threads is made to load the shim (package
// inject) and to call its attach entry point (shim/csrc/attach.c), which
// points the loaded objects' GOT entries of the allocator at the shim;
// its threads then write their calls into rings of the region record
// made of the memfd the process created. When record ends — the
// duration, Ctrl-C, or killed — the pipe only record held reports EOF
// in the process, whose shim puts every entry back and goes dormant.
//
// Memory allocated before the attach has no recorded allocation: its
// faults land in their mapping's class ([heap], [anon]), never at a
// site.
//
// A process injection cannot reach fails start with an
// *inject.RefusedError (IsRefused): the caller records it with uprobes.
type AttachSource struct {
	InProcessSource
}

// IsRefused reports whether err is an attach that could not be made
// (static program, ptrace denied, seccomp, no dlopen, ...), with the
// reason in one line: nothing in the process was changed.
func IsRefused(err error) (string, bool) {
	var r *inject.RefusedError
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return "", false
}

// CheckAttach refuses, before a recording starts, a process that cannot
// be attached to (inject.Examine's reasons) with an error IsRefused
// recognizes.
func CheckAttach(pid int) error {
	if !shim.Supported() {
		return &inject.RefusedError{Reason: "the allocator shim is built for x86-64 only"}
	}
	if environHas(pid, shim.EnvName+"=") {
		return &inject.RefusedError{Reason: "it is recorded already: faultline record started it with the shim preloaded"}
	}
	_, err := inject.Examine(pid)
	return err
}

// environHas reports whether pid's environment (as it was at its exec)
// has an entry starting with prefix.
func environHas(pid int, prefix string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, e := range bytes.Split(b, []byte{0}) {
		if bytes.HasPrefix(e, []byte(prefix)) {
			return true
		}
	}
	return false
}

// attached is the in-process method at work on an attached process.
type attached struct {
	*inproc
	pipe *os.File // the write end of the pipe the process's shim watches
	// What attach injects: the shim object and its entry point's offset.
	o     *AttachSource
	obj   []byte
	entry uint64
}

func (a *attached) close() {
	a.inproc.close()
	a.pipe.Close()
}

func (o *AttachSource) start(s *session) (source, error) {
	cfg := s.cfg
	if cfg.Pid <= 0 || cfg.Cmd != "" || cfg.All {
		return nil, errors.New("attaching records a running process (-p)")
	}
	if err := CheckAttach(cfg.Pid); err != nil {
		return nil, err
	}
	obj, _ := shim.ObjectFor(o.Family)
	entry, err := attachEntry(obj)
	if err != nil {
		return nil, err
	}
	return &attached{inproc: newInproc(s, nil, &o.InProcessSource), o: o, obj: obj, entry: entry}, nil
}

// attach injects the shim into the process and takes its rings. Record
// calls it once the kernel's events of the process are open, disabled;
// attach enables them just before the shim's go, so that the recording
// starts with the shim's calls and no call's faults come before the
// events.
func (a *attached) attach() error {
	cfg := a.s.cfg
	var shimCopy *shimCopy
	if sharesRoot(cfg.Pid) {
		copySrc, err := memfdOf("faultline-shim", a.obj)
		if err != nil {
			return err
		}
		shimCopy = publicShim("/proc/self/fd/" + strconv.Itoa(int(copySrc.Fd())))
		copySrc.Close()
		if shimCopy == nil {
			return errors.New("no temporary directory every user can reach and map executables from, to copy the shim to")
		}
	} else {
		var err error
		if shimCopy, err = rootShim(cfg.Pid, a.obj); err != nil {
			return err
		}
	}
	region, pipe, err := attachProcess(cfg.Pid, shimCopy.path, a.obj, a.entry, a.o.regionOptions(cfg), a.s.enable)
	inRoot := shimCopy.at != nil
	if err != nil || inRoot {
		// The process maps the copy in its root: its name goes now.
		shimCopy.remove()
	}
	if err != nil {
		return err
	}
	if ns, err := ProcessNamespaces(cfg.Pid); err == nil && len(ns.NSpid) > 1 {
		region.SetHostIDs(hostThreadIDs(cfg.Pid, ns.NSpid[len(ns.NSpid)-1]))
	}
	a.region, a.pipe = region, pipe
	if !inRoot {
		a.shimCopy = shimCopy
	}
	return nil
}

// attachEntry is the offset in the shim object of its attach entry
// point, faultline_attach_inject.
func attachEntry(obj []byte) (uint64, error) {
	f, err := elf.NewFile(bytes.NewReader(obj))
	if err != nil {
		return 0, fmt.Errorf("the shim object: %w", err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return 0, fmt.Errorf("the shim object: %w", err)
	}
	for _, s := range syms {
		if s.Name == injectEntry && s.Value != 0 {
			return s.Value, nil
		}
	}
	return 0, errors.New("the shim object has no attach entry point")
}

const injectEntry = "faultline_attach_inject"

func memfdOf(name string, b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// The argument of faultline_attach_inject past inject.ArgHeader (struct
// fl_inject in shim/csrc/attach.c).
const (
	argTracer   = 0  // int64: record's pid, whose exit the shim watches for (0: not in its PID namespace)
	argState    = 8  // uint32: 1 once prepared is set
	argGo       = 12 // uint32: 1 attach, 2 give up
	argPrepared = 16 // int64: the memfd | the pipe's write end << 32, or -errno
	argSize     = 24
)

// Bounds on the injected thread's steps as record waits for them: dlopen
// and the shim's set-up, then the attach.
const (
	prepareWait = 10 * time.Second
	attachWait  = 5 * time.Second
)

// attachProcess loads the shim copy at path (pid's path, of obj's bytes) into pid (unless a shim of
// the same bytes is loaded there already, dormant from an earlier attach)
// and attaches it to a region of o, calling beforeGo just before the
// shim may start: it returns the region and the pipe's write end. The injected thread runs the calls on its own (inject.Inject):
// record, killed at any point after the thread's release, leaves the
// process running, the shim given up (it sees record exit) or detached
// (the pipe's EOF).
func attachProcess(pid int, path string, obj []byte, entry uint64, o shim.Options, beforeGo func() error) (region *shim.Region, pipe *os.File, err error) {
	t, err := inject.Examine(pid)
	if err != nil {
		return nil, nil, err
	}
	base, err := loadedShim(pid, path, obj)
	if err != nil {
		return nil, nil, err
	}
	spec := inject.Spec{Path: path, Symbol: injectEntry, Arg: make([]byte, argSize)}
	if base != 0 {
		spec.Entry = base + entry
	}
	if samePidNS(pid) {
		binary.NativeEndian.PutUint64(spec.Arg[argTracer:], uint64(os.Getpid()))
	}
	runtime.LockOSThread()
	in, err := t.Inject(spec)
	runtime.UnlockOSThread()
	if err != nil {
		return nil, nil, err
	}
	defer in.Close()
	var prepared int64
	ended, err := in.Wait(prepareWait, func(arg []byte) bool {
		prepared = int64(binary.NativeEndian.Uint64(arg[argPrepared:]))
		return binary.NativeEndian.Uint32(arg[argState:]) == 1
	})
	if err == nil && ended {
		_, rc, derr := in.Done()
		var le *inject.LoadError
		if errors.As(derr, &le) {
			return nil, nil, &inject.RefusedError{Reason: "its dynamic loader refused the shim: " + le.Msg}
		}
		return nil, nil, &inject.RefusedError{Reason: fmt.Sprintf("the shim in the process could not make its rings: %v", unix.Errno(-int64(rc)))}
	}
	if err != nil {
		return nil, nil, err
	}
	if prepared < 0 {
		in.Wait(attachWait, nil)
		return nil, nil, &inject.RefusedError{Reason: fmt.Sprintf("the shim in the process could not make its rings: %v", unix.Errno(-prepared))}
	}
	region, pipe, err = takeRegion(pid, int(prepared&0xffffffff), int(prepared>>32), o)
	if err == nil {
		err = beforeGo()
	}
	goWord := []byte{1, 0, 0, 0}
	if err != nil {
		goWord[0] = 2
	}
	if werr := in.WriteArg(argGo, goWord); werr != nil && err == nil {
		err = werr
	}
	if err == nil {
		if _, err = in.Wait(attachWait, nil); err == nil {
			var rc uint64
			_, rc, err = in.Done()
			if err == nil && int64(rc) == -int64(unix.ECANCELED) {
				err = &inject.RefusedError{Reason: "its thread gave up waiting for record to take the rings (record too slow on a loaded machine?)"}
			} else if err == nil && int64(rc) < 0 {
				err = fmt.Errorf("the shim in the process could not attach: %v", unix.Errno(-int64(rc)))
			}
		}
	} else {
		in.Wait(attachWait, nil)
	}
	if err != nil && region != nil {
		region.Close()
		pipe.Close()
	}
	if err != nil {
		return nil, nil, err
	}
	return region, pipe, nil
}

// samePidNS reports whether pid is in record's PID namespace, where
// record's pid means record.
func samePidNS(pid int) bool {
	var a, b unix.Stat_t
	return unix.Stat("/proc/self/ns/pid", &a) == nil && unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/pid", &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev
}

// takeRegion takes copies of the process's memfd and pipe write end
// (pidfd_getfd) and makes the region of the memfd.
func takeRegion(pid, memfd, wfd int, o shim.Options) (*shim.Region, *os.File, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("pidfd_open", err)
	}
	defer unix.Close(pidfd)
	mfd, err := unix.PidfdGetfd(pidfd, memfd, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("pidfd_getfd", err)
	}
	pfd, err := unix.PidfdGetfd(pidfd, wfd, 0)
	if err != nil {
		unix.Close(mfd)
		return nil, nil, os.NewSyscallError("pidfd_getfd", err)
	}
	pipe := os.NewFile(uintptr(pfd), "faultline-attach-pipe")
	region, err := shim.AttachRegion(o, os.NewFile(uintptr(mfd), "memfd:faultline-rings"))
	if err != nil {
		pipe.Close()
		return nil, nil, err
	}
	return region, pipe, nil
}

// loadedShim returns the load address of the shim in pid: the copy at
// path, or one an earlier attach loaded (its copy removed since) if it
// has obj's bytes; 0 when none is loaded. A shim of other bytes (an
// earlier faultline's) is refused: two would both redirect the
// allocator.
func loadedShim(pid int, path string, obj []byte) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 6 || fs[2] != "00000000" {
			continue
		}
		p := strings.TrimSuffix(strings.Join(fs[5:], " "), " (deleted)")
		if p == path {
			return parseLo(fs[0]), nil
		}
		if !strings.HasPrefix(filepath.Base(p), "libfaultline-shim") {
			continue
		}
		have, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/map_files/" + fs[0])
		if err != nil || !bytes.Equal(have, obj) {
			return 0, &inject.RefusedError{Reason: "another build of faultline's shim is loaded in it (an earlier faultline attached): restart it to attach with this one"}
		}
		return parseLo(fs[0]), nil
	}
	return 0, nil
}

func parseLo(r string) uint64 {
	lo, _, _ := strings.Cut(r, "-")
	v, _ := strconv.ParseUint(lo, 16, 64)
	return v
}
