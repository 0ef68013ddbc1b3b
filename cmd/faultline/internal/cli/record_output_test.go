package cli

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
	"github.com/faultline/faultline/perfdata"
)

// requireRoot skips a test that makes device nodes or changes inode flags.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: mknod, chattr and chown to another user need root")
	}
}

// recordInto runs createOutput and commit for -o path with payload as the
// recording, as the sudo user 65534 when run by root.
func recordInto(t *testing.T, path, payload string) (*fakeSys, error) {
	t.Helper()
	sys := newFakeSys()
	sys.env = map[string]string{"SUDO_UID": "65534", "SUDO_GID": "65534"}
	sys.euid = os.Geteuid() // whose files the test makes, trusted
	r, _ := newTestRecorder(sys, &recordOptions{output: path})
	o, err := r.createOutput()
	if err != nil {
		return sys, err
	}
	o.File().WriteString(payload)
	err = o.Commit()
	o.Discard()
	return sys, err
}

// TestOutputWritesIntoSpecialFiles: -o naming a
// device node (a /dev/null made with mknod c 1 3), a FIFO or a symlink to
// one is written into, as perf record -o does: the node stays what it was
// (type, device numbers, mode, owner) and is never chowned to the sudo
// user.
func TestOutputWritesIntoSpecialFiles(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	null := filepath.Join(dir, "null")
	if err := unix.Mknod(null, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod: %v", err)
	}
	if err := os.Chmod(null, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(null, link); err != nil {
		t.Fatal(err)
	}
	checkNull := func(when string) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(null, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode != unix.S_IFCHR|0o666 || st.Rdev != unix.Mkdev(1, 3) || st.Uid != 0 {
			t.Errorf("%s: the device node is now mode %o rdev %x uid %d; want a character device 1,3, 0666, root's", when, st.Mode, st.Rdev, st.Uid)
		}
	}
	for _, p := range []string{null, link} {
		sys, err := recordInto(t, p, "recording")
		if err != nil {
			t.Fatalf("-o %s: %v", p, err)
		}
		if len(sys.chowned) > 0 {
			t.Errorf("-o %s: chowned %v", p, sys.chowned)
		}
		checkNull("-o " + p)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink to the device was replaced: %v %v", fi.Mode(), err)
	}

	// A FIFO, read before record opens it and after.
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, early := range []bool{true, false} {
		got := make(chan string, 1)
		readFrom := func(f *os.File) {
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				got <- err.Error()
				return
			}
			got <- string(b)
		}
		var reader *os.File
		if early {
			// Opened without waiting for a writer, reading blocks after.
			fd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK, 0)
			if err != nil {
				t.Fatal(err)
			}
			unix.SetNonblock(fd, false)
			reader = os.NewFile(uintptr(fd), fifo)
		}
		r, _ := newTestRecorder(newFakeSys(), &recordOptions{output: fifo})
		o, err := r.createOutput()
		if err != nil {
			t.Fatalf("FIFO (reader first %v): %v", early, err)
		}
		o.File().WriteString("through the fifo")
		if early {
			go readFrom(reader)
		} else {
			go func() {
				f, err := os.Open(fifo) // waits for commit's open
				if err != nil {
					got <- err.Error()
					return
				}
				readFrom(f)
			}()
		}
		if err := o.Commit(); err != nil {
			t.Fatalf("FIFO (reader first %v): %v", early, err)
		}
		if s := <-got; s != "through the fifo" {
			t.Errorf("FIFO (reader first %v): read %q", early, s)
		}
		if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("the FIFO was replaced: %v %v", fi.Mode(), err)
		}
	}
}

// TestOutputRefusedBeforeRun: an existing read-only output, and one that
// is immutable (chattr +i), are refused by createOutput, before the
// program would run, and stay as they were.
func TestOutputRefusedBeforeRun(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro.data")
	if err := os.WriteFile(ro, []byte("keep"), 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := recordInto(t, ro, "new"); err == nil || !strings.Contains(err.Error(), "read-only (mode 0444)") {
		t.Errorf("read-only output: %v", err)
	}
	if b, _ := os.ReadFile(ro); string(b) != "keep" {
		t.Errorf("read-only output now holds %q", b)
	}

	requireRoot(t)
	im := filepath.Join(dir, "im.data")
	if err := os.WriteFile(im, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", im).CombinedOutput(); err != nil {
		t.Skipf("chattr +i is not available here (%v: %s): the immutable case is not checked", err, out)
	}
	defer exec.Command("chattr", "-i", im).Run()
	if _, err := recordInto(t, im, "new"); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("immutable output: %v", err)
	}
	if b, _ := os.ReadFile(im); string(b) != "keep" {
		t.Errorf("immutable output now holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// TestRemoveStaleTemps: only a dead run's temporary file (our name
// pattern, a regular perf.data file of this user, its flock free) goes.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dead := write(".x.data.123.tmp", perfdata.MagicLE+"rest of a header")
	live := write(".y.data.456.tmp", perfdata.MagicLE+"rest of a header")
	notOurs := write(".z.data.789.tmp", "a user's own file")
	otherName := write(".x.data.tmp", perfdata.MagicLE)
	os.Symlink(dead, filepath.Join(dir, ".l.data.1.tmp"))
	f, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	n, err := rec.RemoveStaleTemps(dir)
	if err != nil || n != 1 {
		t.Errorf("removed %d (%v), want 1", n, err)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("the dead run's file is still there")
	}
	for _, p := range []string{live, notOurs, otherName, filepath.Join(dir, ".l.data.1.tmp")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed", filepath.Base(p))
		}
	}
}

// TestOutputOtherUsersLinkOrFIFORefused: as root, record refuses before
// the program runs, exit 125, to write through another user's link (to a
// device: a character device made under a temp dir stands in for the
// disk) or into another user's FIFO, saying why; the device and FIFO get
// nothing. The other user is uid 54321 (no such user needed: ownership is
// what counts).
func TestOutputOtherUsersLinkOrFIFORefused(t *testing.T) {
	requireRoot(t)
	const other = 54321
	dir := t.TempDir()
	os.Chmod(dir, 0o1777) // a /tmp of its own
	null := filepath.Join(dir, "dev")
	if err := unix.Mknod(null, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod: %v", err)
	}
	link := filepath.Join(dir, "fl_dev.data")
	fifo := filepath.Join(dir, "fl_fifo.data")
	if err := os.Symlink(null, link); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(fifo, 0o622); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, fifo} {
		if err := os.Lchown(p, other, other); err != nil {
			t.Fatal(err)
		}
	}
	// The FIFO's reader, as the other user's cat would be.
	rfd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	reader := os.NewFile(uintptr(rfd), fifo)
	defer reader.Close()
	marker := filepath.Join(dir, "ran")
	for _, tc := range []struct{ out, want string }{
		{link, "is a symbolic link owned by uid 54321, not by root or you, to a character device"},
		{fifo, "is a FIFO owned by uid 54321, not by root or you"},
	} {
		var errb bytes.Buffer
		code := Main([]string{"record", "-q", "-o", tc.out, "--", "touch", marker}, &Env{Stdout: &bytes.Buffer{}, Stderr: &errb})
		if code != ExitRecordFailed || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("-o %s: exit %d, stderr %q; want %d and %q", tc.out, code, errb.String(), ExitRecordFailed, tc.want)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("-o %s: the program ran", tc.out)
			os.Remove(marker)
		}
	}
	var b [64]byte
	if n, _ := reader.Read(b[:]); n > 0 {
		t.Errorf("the other user's FIFO received %q", b[:n])
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was touched: %v", err)
	}
}

// TestOutputDevStdoutToAFile: -o /dev/stdout with standard output
// redirected to a file writes into that file; the link (here a copy of
// /dev/stdout's, to /proc/self/fd/N) is never replaced.
func TestOutputDevStdoutToAFile(t *testing.T) {
	dir := t.TempDir()
	redirected, err := os.Create(filepath.Join(dir, "redirected"))
	if err != nil {
		t.Fatal(err)
	}
	defer redirected.Close()
	redirected.WriteString("older and longer contents")
	stdout := filepath.Join(dir, "stdout")
	if err := os.Symlink("/proc/self/fd/"+strconv.Itoa(int(redirected.Fd())), stdout); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{stdout, "/proc/self/fd/" + strconv.Itoa(int(redirected.Fd()))} {
		if _, err := recordInto(t, p, "recording"); err != nil {
			t.Fatalf("-o %s: %v", p, err)
		}
		if b, _ := os.ReadFile(redirected.Name()); string(b) != "recording" {
			t.Errorf("-o %s: the file holds %q", p, b)
		}
	}
	if fi, err := os.Lstat(stdout); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", err)
	}
}

// TestStallCause: the cause record gives for a program that ran on
// unrecorded follows what it saw of itself: a blocked write to its
// output first, then being stopped, then a pause (starved of CPU).
func TestStallCause(t *testing.T) {
	for _, tc := range []struct {
		st   rec.Stalls
		want string
	}{
		{rec.Stalls{WriteBlocked: 4 * time.Second, Stopped: true, Paused: time.Second}, "writing the recording to standard output blocked for up to 4.0 s"},
		{rec.Stalls{Stopped: true, Paused: 15 * time.Second}, "record was stopped (SIGSTOP, Ctrl-Z) for up to 15.0 s"},
		{rec.Stalls{Paused: 2 * time.Second}, "record did not run for up to 2.0 s (starved of CPU"},
		{rec.Stalls{}, "raise --shim-wait"},
	} {
		if got := stallCause(tc.st, "-"); !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.st, got, tc.want)
		}
	}
}
