package recorder

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// lowestFreeFD is the descriptor number the kernel hands out next: the
// one a fresh open gets (the kernel always picks the lowest free number).
func lowestFreeFD(t *testing.T) uint64 {
	t.Helper()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	fd := f.Fd()
	f.Close()
	return uint64(fd)
}

// TestOpenErrorWrapsErrno: when the kernel refuses an event, the error
// open returns is ErrNoEvents and, through %w, the errno itself, so the
// command can tell a full descriptor table (EMFILE, made real here by
// lowering RLIMIT_NOFILE to the next free descriptor) from a permission
// problem (EACCES, EPERM) instead of guessing.
func TestOpenErrorWrapsErrno(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the kernel checks perf_event_paranoid before it allocates the descriptor")
	}
	if _, err := os.Stat("/proc/sys/kernel/perf_event_paranoid"); err != nil {
		t.Skip("this kernel has no perf events")
	}
	cfg := testConfig()
	s := testSession(t, cfg)
	s.specs = s.buildSpecs()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = lowestFreeFD(t)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	err := s.open([]int{os.Getpid()})
	if rerr := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	s.closeAll()
	if err == nil {
		t.Fatalf("open succeeded with RLIMIT_NOFILE %d", lim.Cur)
	}
	if !errors.Is(err, ErrNoEvents) || !errors.Is(err, unix.EMFILE) {
		t.Fatalf("open with no free descriptor: %v; want ErrNoEvents wrapping EMFILE", err)
	}
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		t.Fatalf("EMFILE error also reads as a permission error: %v", err)
	}
	t.Log(err)
}
