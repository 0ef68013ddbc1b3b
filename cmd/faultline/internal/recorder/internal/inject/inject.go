// Package inject makes a running process load a shared object and call
// a function in it, with ptrace: one of its threads is stopped where it
// holds none of the locks the calls take (not in the allocator, not in
// the dynamic loader) and made to issue mmap for a page, from code
// written where nothing of the process runs (past the end of an
// executable segment) that puts the thread back as it was if this
// process dies before it moves the thread on (gapSource); the page gets a trampoline that calls dlopen and the object's function
// on the thread's stack and then puts the thread back exactly as it was —
// registers, FPU/SSE/AVX state, errno, a system call it was in issued
// again — and the thread is let go into it at once. Killed at any
// point, the injecting process leaves the thread to run on as it was, or
// to finish the calls and return on its own. Its other threads run on
// throughout.
//
// x86-64 and glibc only (dlopen in libc.so.6 from 2.34, or libdl.so.2).
package inject

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// RefusedError says why a process cannot be injected into: the caller
// records it another way.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

func refused(format string, a ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, a...)}
}

// Target is a process examined for injection.
type Target struct {
	pid                             int
	libc                            *object
	dlopen, dlsym, dlerror, errnoAt uint64
	// gap is where the injected system call's code goes (gapSource).
	gap uint64
	// avoidPC: a thread stopped with its pc there may hold a lock the
	// calls take; avoidStack: a return address there on its stack says
	// the same of a caller.
	avoidPC, avoidStack []addrRange
}

// Examine reads what injecting into pid needs (its C library's dlopen,
// the code a thread must not be stopped in) and refuses, with a
// *RefusedError, a process that cannot take it: not x86-64, static, with
// no dlopen, under a seccomp filter (a system call the injection makes
// could kill it), already traced, or stopped.
func Examine(pid int) (*Target, error) {
	if runtime.GOARCH != "amd64" {
		return nil, refused("injection is built for x86-64 only")
	}
	if err := checkStatus(pid); err != nil {
		return nil, err
	}
	maps, err := readMaps(pid)
	if err != nil {
		return nil, err
	}
	var libc, libdl, ldso *object
	var others []string
	seen := map[string]bool{}
	for _, m := range maps {
		if !strings.HasPrefix(m.path, "/") || seen[m.path] || !strings.Contains(m.perms, "x") {
			continue
		}
		seen[m.path] = true
		base := filepath.Base(m.path)
		var dst **object
		switch {
		case strings.HasPrefix(base, "libc.so.6") || strings.HasPrefix(base, "libc-2."):
			dst = &libc
		case strings.HasPrefix(base, "libdl.so.2") || strings.HasPrefix(base, "libdl-2."):
			dst = &libdl
		case strings.HasPrefix(base, "ld-linux"):
			dst = &ldso
		default:
			others = append(others, m.path)
			continue
		}
		if *dst, err = openObject(pid, maps, m.path); err != nil {
			return nil, err
		}
	}
	// A static program is refused even with a libc mapped: one its own
	// dlopen (NSS, iconv) loaded beside its built-in C library, whose
	// dlopen the shim's loading would go through. A program the dynamic
	// loader ran as a command (exe the loader itself) is not static.
	exe, err := openELF("/proc/" + strconv.Itoa(pid) + "/exe")
	if err == nil {
		defer exe.Close()
		exePath, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		if slices.IndexFunc(exe.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) < 0 && (ldso == nil || ldso.path != exePath) {
			return nil, refused("a static program (no dynamic loader to load the shim)")
		}
	}
	if libc == nil {
		return nil, refused("no GNU C library (libc.so.6) is mapped")
	}
	t := &Target{pid: pid, libc: libc, dlopen: libc.symbol("dlopen"), dlsym: libc.symbol("dlsym"), dlerror: libc.symbol("dlerror"),
		errnoAt: libc.symbol("__errno_location")}
	if t.dlopen == 0 && libdl != nil {
		t.dlopen, t.dlsym, t.dlerror = libdl.symbol("dlopen"), libdl.symbol("dlsym"), libdl.symbol("dlerror")
	}
	if t.dlopen == 0 || t.dlsym == 0 || t.dlerror == 0 || t.errnoAt == 0 {
		return nil, refused("its C library has no dlopen (glibc before 2.34 without libdl.so.2 loaded)")
	}
	for _, o := range []*object{libc, ldso, libdl} {
		if o != nil && t.gap == 0 {
			t.gap = o.gap
		}
	}
	if ldso != nil {
		t.avoidPC = append(t.avoidPC, ldso.text...)
		t.avoidStack = append(t.avoidStack, ldso.text...)
	}
	locks := []addrRange{
		libc.region("malloc", "free", "calloc", "realloc", "memalign", "valloc", "pvalloc", "posix_memalign",
			"aligned_alloc", "reallocarray", "malloc_trim", "malloc_usable_size", "mallopt", "malloc_stats",
			"malloc_info", "mallinfo", "mallinfo2", "__libc_malloc", "__libc_free", "__libc_calloc",
			"__libc_realloc", "__libc_memalign", "__libc_valloc", "__libc_pvalloc", "__libc_mallopt",
			"__libc_mallinfo", "__default_morecore"),
		libc.region("dl_iterate_phdr"),
	}
	t.avoidPC = append(t.avoidPC, locks...)
	t.avoidStack = append(t.avoidStack, locks...)
	t.avoidPC = append(t.avoidPC, libc.region("pthread_create"), libc.region("fork"), libc.region("dlopen"))
	// Another allocator (jemalloc, tcmalloc, mimalloc): all of its code.
	for _, p := range others {
		o, err := openObject(pid, maps, p)
		if err == nil && o.symbol("malloc") != 0 {
			t.avoidPC = append(t.avoidPC, o.text...)
			t.avoidStack = append(t.avoidStack, o.text...)
		}
		if err == nil && t.gap == 0 {
			t.gap = o.gap
		}
	}
	if t.gap == 0 {
		return nil, refused("none of its executable segments ends with %d bytes spare in its last page for the injected system call", len(gapCode))
	}
	return t, nil
}

// checkStatus refuses a process under a seccomp filter, traced or
// stopped, from /proc/PID/status.
func checkStatus(pid int) error {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch {
		case k == "Seccomp" && v != "0":
			return refused("it runs under seccomp (mode %s): a system call the injection makes could kill it", v)
		case k == "TracerPid" && v != "0":
			return refused("it is already traced by process %s (a debugger?)", v)
		case k == "State" && (strings.HasPrefix(v, "T") || strings.HasPrefix(v, "t")):
			return refused("it is stopped (%s)", v)
		}
	}
	return nil
}

// Stopped is a thread of the target stopped at a safe point. The OS
// thread that stopped it must make every request and Release it
// (runtime.LockOSThread).
type Stopped struct {
	t  *Target
	th *thread
	// Signals counts the signals the thread received while stopped or
	// calling: each was delivered.
	Signals int
	// Tries is how many stops it took to find a safe point.
	Tries int
}

// safeWait bounds the search for a thread at a safe point.
const safeWait = 3 * time.Second

// Stop stops a thread of the target at a safe point: its pc and the
// return addresses on its stack outside the code that takes the
// allocator's and the loader's locks, with room on its stack. It visits
// the threads in turn (the main thread first), stopping each up to
// stopsPerVisit times and letting it run on a little in between, until
// one is at a safe point or safeWait has passed: a thread that never is
// (a word on its stack that looks like a return into malloc, left by
// an earlier call) leaves the others their turns.
func (t *Target) Stop() (*Stopped, error) {
	deadline := time.Now().Add(safeWait)
	tries := 0
	var last error
	skip := map[int]bool{} // threads without stack room, or gone
	for time.Now().Before(deadline) {
		tids, err := threads(t.pid)
		if err != nil {
			return nil, err
		}
		visited := 0
		for _, tid := range tids {
			if skip[tid] || !time.Now().Before(deadline) {
				continue
			}
			th, err := seize(tid, time.Second)
			if err != nil {
				if errors.Is(err, unix.EPERM) {
					return nil, refused("ptrace denied (%v)%s", err, yamaNote())
				}
				last, skip[tid] = err, true
				continue
			}
			visited++
			for i := 0; i < stopsPerVisit && time.Now().Before(deadline); i++ {
				tries++
				ok, room := t.safe(th)
				if ok {
					return &Stopped{t: t, th: th, Tries: tries}, nil
				}
				if !room {
					skip[tid] = true
					break
				}
				if i+1 == stopsPerVisit {
					break
				}
				if err := th.resume(time.Duration(1+tries%5) * time.Millisecond); err != nil {
					last, skip[tid] = err, true
					break
				}
			}
			th.restore()
			th.detach()
		}
		if visited == 0 {
			break
		}
	}
	if last != nil {
		return nil, last
	}
	return nil, refused("no thread stopped outside the allocator and the dynamic loader within %v", safeWait)
}

// stopsPerVisit is how many times Stop stops a thread before it turns to
// the next one.
const stopsPerVisit = 10

// threads lists pid's threads, pid first.
func threads(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	out := []int{pid}
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil && tid != pid {
			out = append(out, tid)
		}
	}
	return out, nil
}

// stackScan is how much of a stopped thread's stack is searched for
// return addresses.
const stackScan = 64 << 10

// minStackRoom is the stack a call needs below the thread's (dlopen and
// the shim's set-up); the main thread's stack grows on demand.
const minStackRoom = 256 << 10

// safe reports whether th is stopped at a safe point, and whether its
// stack has room for the calls at all.
func (t *Target) safe(th *thread) (ok, room bool) {
	sp, pc := th.regs.Rsp, th.regs.Rip
	for _, r := range t.avoidPC {
		if r.contains(pc) {
			return false, true
		}
	}
	maps, err := readMaps(t.pid)
	if err != nil {
		return false, false
	}
	i := slices.IndexFunc(maps, func(m mapping) bool { return sp >= m.lo && sp < m.hi })
	if i < 0 {
		return false, false
	}
	if maps[i].path != "[stack]" && sp-maps[i].lo < minStackRoom {
		return false, false
	}
	top := min(maps[i].hi, sp+stackScan)
	buf := make([]byte, top-sp)
	if th.read(sp, buf) != nil {
		return false, false
	}
	for o := 0; o+8 <= len(buf); o += 8 {
		w := uint64(buf[o]) | uint64(buf[o+1])<<8 | uint64(buf[o+2])<<16 | uint64(buf[o+3])<<24 |
			uint64(buf[o+4])<<32 | uint64(buf[o+5])<<40 | uint64(buf[o+6])<<48 | uint64(buf[o+7])<<56
		for _, r := range t.avoidStack {
			if r.contains(w) {
				return false, true
			}
		}
	}
	return true, true
}

// yamaNote says what the Yama LSM allows, where it is on.
func yamaNote() string {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil {
		return ""
	}
	return "; kernel.yama.ptrace_scope=" + strings.TrimSpace(string(b))
}

// Release puts the thread back as it was and lets it run on.
func (s *Stopped) Release() error {
	err := s.th.restore()
	s.Signals = s.th.signals
	s.th.detach()
	return err
}
