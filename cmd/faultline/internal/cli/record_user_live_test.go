package cli

import (
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// asUser returns the credentials of a user other than root to run record
// as (fltest, else nobody), or nil when this process is not root (it then
// runs as itself). It skips where no such user exists or the kernel lets
// no user open perf events.
func asUser(t *testing.T) *syscall.Credential {
	t.Helper()
	if testing.Short() {
		t.Skip("records live; skipped with -short")
	}
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		t.Skipf("no perf_event_paranoid: %v", err)
	}
	if p, _ := strconv.Atoi(strings.TrimSpace(string(b))); p > 2 {
		t.Skipf("kernel.perf_event_paranoid is %d: a user may not record", p)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	if c := userCred(); c != nil {
		return c
	}
	t.Skip("no user fltest or nobody to record as")
	return nil
}

// userCred returns the credentials of fltest, else nobody, or nil.
func userCred() *syscall.Credential {
	for _, name := range []string{"fltest", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return nil
}

// userDir makes a directory any user may read and write, holding copies
// of the given files (executable), removed at the end of the test.
func userDir(t *testing.T, files ...string) (dir string, copies []string) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "faultline-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(c, b, 0o755); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
	}
	return dir, copies
}

// TestRecordInprocLiveMapCallsAsUser records testdata/mem/src/phases.c as
// a user (not root, no tracefs): the method is in-process, the
// memory-map calls are recorded by the shim, so the releases and re-faults
// of the program's own mappings are seen (checkMemPhases: the same
// arithmetic as for root), and a default run prints no warning.
func TestRecordInprocLiveMapCallsAsUser(t *testing.T) {
	cred := asUser(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc) to build testdata/mem/src/phases.c")
	}
	phases := buildOnce(t, "phases", func(bin string) *exec.Cmd {
		return exec.Command("cc", "-O2", "-g", "-o", bin, "../../../../testdata/mem/src/phases.c")
	})
	dir, bins := userDir(t, buildFaultline(t), phases)
	out := filepath.Join(dir, "u.data")
	cmd := exec.Command(bins[0], "record", "-o", out, "--", bins[1])
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "PERF_BUILDID_DIR=" + filepath.Join(dir, "cache")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("record as a user: %v\n%s", err, stderr.String())
	}
	t.Logf("%s", stderr.String())
	if !strings.Contains(stderr.String(), "in-process") {
		t.Errorf("record as a user did not record in-process")
	}
	if strings.Contains(stderr.String(), "warning") {
		t.Errorf("a default run as a user warned")
	}
	res := analyzeLive(t, out)
	if res.Summary.Resident.MapCalls == 0 {
		t.Fatalf("no memory-map calls recorded")
	}
	checkMemPhases(t, res)
}
