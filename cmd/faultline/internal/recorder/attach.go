package recorder

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

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
	entries, err := attachEntries(obj)
	if err != nil {
		return nil, err
	}
	copySrc, err := memfdOf("faultline-shim", obj)
	if err != nil {
		return nil, err
	}
	shimCopy := publicShim("/proc/self/fd/" + strconv.Itoa(int(copySrc.Fd())))
	copySrc.Close()
	if shimCopy == nil {
		return nil, errors.New("no temporary directory every user can reach and map executables from, to copy the shim to")
	}
	region, pipe, err := attachProcess(cfg.Pid, shimCopy.path, entries, o.regionOptions(cfg))
	if err != nil {
		shimCopy.remove()
		return nil, err
	}
	ip := newInproc(s, region, &o.InProcessSource)
	ip.shimCopy = shimCopy
	return &attached{inproc: ip, pipe: pipe}, nil
}

// attachEntries are the offsets in the shim object of its attach entry
// points.
type attachEntry struct{ prepare, attach uint64 }

func attachEntries(obj []byte) (attachEntry, error) {
	f, err := elf.NewFile(bytes.NewReader(obj))
	if err != nil {
		return attachEntry{}, fmt.Errorf("the shim object: %w", err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return attachEntry{}, fmt.Errorf("the shim object: %w", err)
	}
	var e attachEntry
	for _, s := range syms {
		switch s.Name {
		case "faultline_attach_prepare":
			e.prepare = s.Value
		case "faultline_attach":
			e.attach = s.Value
		}
	}
	if e.prepare == 0 || e.attach == 0 {
		return e, errors.New("the shim object has no attach entry points")
	}
	return e, nil
}

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

// attachProcess loads the shim copy at path into pid (unless a shim of the same
// bytes is loaded there already, dormant from an earlier attach) and
// attaches it to a region of o: it returns the region and the pipe's
// write end. ptrace requests come from the OS thread that seized.
func attachProcess(pid int, path string, e attachEntry, o shim.Options) (region *shim.Region, pipe *os.File, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t, err := inject.Examine(pid)
	if err != nil {
		return nil, nil, err
	}
	base, err := loadedShim(pid, path)
	if err != nil {
		return nil, nil, err
	}
	st, err := t.Stop()
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if rerr := st.Release(); rerr != nil && err == nil {
			err = fmt.Errorf("restoring the stopped thread: %w", rerr)
		}
	}()
	if base == 0 {
		if err := st.Dlopen(path); err != nil {
			return nil, nil, &inject.RefusedError{Reason: "its dynamic loader refused the shim: " + err.Error()}
		}
		if base, err = loadedShim(pid, path); err != nil || base == 0 {
			return nil, nil, fmt.Errorf("the shim loaded but is not in the process's maps (%v)", err)
		}
	}
	r, err := st.Call(base + e.prepare)
	if err != nil {
		return nil, nil, err
	}
	if int64(r) < 0 {
		return nil, nil, &inject.RefusedError{Reason: fmt.Sprintf("the shim in the process could not make its rings: %v", unix.Errno(-int64(r)))}
	}
	memfd, wfd := r&0xffffffff, r>>32
	region, pipe, gerr := takeRegion(pid, int(memfd), int(wfd), o)
	if gerr != nil {
		// Attach to the empty memfd fails, and closes both in the process.
		st.Call(base+e.attach, memfd, wfd)
		return nil, nil, gerr
	}
	rc, err := st.Call(base+e.attach, memfd, wfd)
	if err == nil && int64(rc) < 0 {
		err = fmt.Errorf("the shim in the process could not attach: %v", unix.Errno(-int64(rc)))
	}
	if err != nil {
		region.Close()
		pipe.Close()
		return nil, nil, err
	}
	return region, pipe, nil
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
// has the same bytes; 0 when none is loaded. A shim of other bytes (an
// earlier faultline's) is refused: two would both redirect the
// allocator.
func loadedShim(pid int, path string) (uint64, error) {
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
		if !strings.Contains(p, "/faultline-shim-") || !strings.HasPrefix(filepath.Base(p), "libfaultline-shim") {
			continue
		}
		have, rerr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/map_files/" + fs[0])
		want, werr := os.ReadFile(path)
		if rerr != nil || werr != nil || !bytes.Equal(have, want) {
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
