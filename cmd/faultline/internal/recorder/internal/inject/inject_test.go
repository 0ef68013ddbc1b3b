package inject

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startSleep starts sleep(1) for d, a dynamically linked program of the
// C library, and waits until it sleeps.
func startSleep(t *testing.T, d time.Duration) *exec.Cmd {
	t.Helper()
	if testing.Short() {
		t.Skip("stops a live process with ptrace; skipped with -short")
	}
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep program")
	}
	c := exec.Command(path, strconv.FormatFloat(d.Seconds(), 'f', 3, 64))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(c.Process.Pid) + "/stat"); err == nil && bytes.Contains(b, []byte(") S ")) {
			return c
		}
	}
	t.Fatal("sleep did not start sleeping")
	return nil
}

// TestInjectRestoresThread injects into sleep, stopped in its
// clock_nanosleep, a call of the C library's getpid — once given by
// address, once by dlopen of the C library and dlsym — and lets it run on
// its own: getpid returns sleep's pid, and sleep ends as it would have
// (status 0, no earlier than asked): the system call the stop broke off
// was issued again by the trampoline, with what was left of it.
func TestInjectRestoresThread(t *testing.T) {
	const d = 1500 * time.Millisecond
	start := time.Now()
	c := startSleep(t, d)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tg, err := Examine(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Spec{{Entry: tg.libc.symbol("getpid")}, {Path: tg.libc.path, Symbol: "getpid"}} {
		in, err := tg.Inject(s)
		if err != nil {
			if _, ok := err.(*RefusedError); ok {
				t.Skipf("cannot ptrace here: %v", err)
			}
			t.Fatal(err)
		}
		if _, err := in.Wait(5*time.Second, nil); err != nil {
			t.Fatal(err)
		}
		done, got, err := in.Done()
		in.Close()
		if !done || err != nil || int(got) != c.Process.Pid {
			t.Errorf("%+v: getpid in the injected thread: done %v, returned %d (%v), want %d", s, done, got, err, c.Process.Pid)
		}
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("sleep ended with %v, want status 0", err)
	}
	if took := time.Since(start); took < d {
		t.Errorf("sleep %v ended after %v: its interrupted sleep was not issued again", d, took)
	}
}

// dieEnv names, in a child of the test binary, the process to inject
// into and the step of the injected system call at which the child
// kills itself.
const dieEnv = "FAULTLINE_INJECT_DIE"

// TestInjectTracerKilled kills the injecting process (SIGKILL, in a
// child of the test) at each step of the injected mmap — registers set,
// at the system call's entry, at its exit — while sleep is stopped in
// its clock_nanosleep: sleep runs on as it was, and ends with status 0
// no earlier than asked (its interrupted sleep issued again).
func TestInjectTracerKilled(t *testing.T) {
	if v := os.Getenv(dieEnv); v != "" {
		dieChild(v)
		return
	}
	for _, step := range []int{stepSet, stepEntry, stepExit} {
		const d = 700 * time.Millisecond
		start := time.Now()
		c := startSleep(t, d)
		child := exec.Command(os.Args[0], "-test.run=^TestInjectTracerKilled$")
		child.Env = append(os.Environ(), dieEnv+"="+strconv.Itoa(c.Process.Pid)+","+strconv.Itoa(step))
		out, err := child.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			if bytes.Contains(out, []byte("REFUSED")) {
				t.Skipf("cannot inject here: %s", out)
			}
			t.Fatalf("step %d: the injecting child ended with %v, want killed at the step:\n%s", step, err, out)
		}
		if err := c.Wait(); err != nil {
			t.Fatalf("step %d: sleep ended with %v, want status 0", step, err)
		}
		if took := time.Since(start); took < d {
			t.Errorf("step %d: sleep %v ended after %v: its interrupted sleep was not issued again", step, d, took)
		}
	}
}

// dieChild injects into the process v names and kills itself at the
// step v names.
func dieChild(v string) {
	pid, step := 0, 0
	fmt.Sscanf(v, "%d,%d", &pid, &step)
	runtime.LockOSThread()
	testDieAt = func(s int) {
		if s == step {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	tg, err := Examine(pid)
	if err == nil {
		_, err = tg.Inject(Spec{Entry: tg.libc.symbol("getpid")})
	}
	if _, ok := err.(*RefusedError); ok {
		fmt.Println("REFUSED", err)
	}
	fmt.Println("the injection did not reach the step:", err)
	os.Exit(1)
}

// TestGapBytes assembles gapSource with the GNU assembler and checks
// gapCode against it.
func TestGapBytes(t *testing.T) {
	if b := assemble(t, gapSource); !bytes.Equal(b, gapCode) {
		t.Errorf("gapCode is not what gapSource assembles to:\n%x", b)
	}
}

// TestInjectLoadError: an object the loader cannot open ends the call
// with dlerror's message, and the thread runs on.
func TestInjectLoadError(t *testing.T) {
	c := startSleep(t, time.Second)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tg, err := Examine(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	in, err := tg.Inject(Spec{Path: "/nonexistent/libnothing.so", Symbol: "f"})
	if err != nil {
		t.Skipf("cannot inject here: %v", err)
	}
	defer in.Close()
	if _, err := in.Wait(5*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err = in.Done()
	if _, ok := err.(*LoadError); !ok || !strings.Contains(err.Error(), "libnothing.so") {
		t.Errorf("got %T %v, want the loader's message naming the object", err, err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("sleep ended with %v, want status 0", err)
	}
}

// TestTrampolineBytes assembles trampolineSource with the GNU assembler
// and checks trampolineCode against it.
func TestTrampolineBytes(t *testing.T) {
	b := assemble(t, trampolineSource)
	if len(b) < blockOff || !bytes.Equal(b[:len(trampolineCode)], trampolineCode) || bytes.ContainsFunc(b[len(trampolineCode):blockOff], func(r rune) bool { return r != 0 }) {
		t.Errorf("trampolineCode is not what trampolineSource assembles to:\n%x", bytes.TrimRight(b[:min(len(b), blockOff)], "\x00"))
	}
}

// assemble returns the .text of src assembled by the GNU assembler.
func assemble(t *testing.T, src string) []byte {
	t.Helper()
	as, err := exec.LookPath("as")
	if err != nil {
		t.Skip("no GNU assembler (as)")
	}
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		t.Skip("no objcopy")
	}
	dir := t.TempDir()
	path, obj, bin := filepath.Join(dir, "t.S"), filepath.Join(dir, "t.o"), filepath.Join(dir, "t.bin")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(as, "--64", "-o", obj, path).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	if out, err := exec.Command(objcopy, "-O", "binary", "-j", ".text", obj, bin).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMallocRegion checks the code a thread must not be stopped in
// against the C library's full symbol table (libc6-dbg's debug file, read
// with nm): malloc's static functions lie in the region found from the
// exported ones.
func TestMallocRegion(t *testing.T) {
	c := startSleep(t, 5*time.Second)
	tg, err := Examine(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	id, err := exec.Command("sh", "-c", "readelf -n "+tg.libc.path+" | awk '/Build ID/ {print $3}'").Output()
	if err != nil || len(bytes.TrimSpace(id)) < 3 {
		t.Skip("no readelf to read the C library's build ID")
	}
	s := strings.TrimSpace(string(id))
	debug := filepath.Join("/usr/lib/debug/.build-id", s[:2], s[2:]+".debug")
	out, err := exec.Command("nm", debug).Output()
	if err != nil {
		t.Skipf("no debug symbols for the C library (%s: install libc6-dbg)", debug)
	}
	internal := map[string]bool{"_int_malloc": true, "_int_free": true, "sysmalloc": true, "malloc_consolidate": true, "_int_realloc": true, "_int_memalign": true}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || !internal[f[2]] {
			continue
		}
		v, _ := strconv.ParseUint(f[0], 16, 64)
		addr := tg.libc.bias + v
		in := false
		for _, r := range tg.avoidStack {
			in = in || r.contains(addr)
		}
		if !in {
			t.Errorf("%s at %#x is outside the code a stopped thread is kept out of", f[2], addr)
		}
		found++
	}
	if found < len(internal) {
		t.Skipf("the debug file names %d of %d of malloc's static functions", found, len(internal))
	}
}
