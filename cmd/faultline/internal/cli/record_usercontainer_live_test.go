package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRecordInprocLiveUserContainer runs record -- sitesvc inside a
// container that an unprivileged user made, as rootless runtimes make
// them: its own user namespace (the user is its root, mapped to nobody
// else), mount and PID namespaces, pivot_root'ed into a tmpfs holding
// only faultline, sitesvc and their libraries (container.sh with
// CONTAINER_FILES). record must record in-process (its method line) and
// analyze, run there too, must name sitesvc's sites file:line: the lines
// of their calls in sitesvc.c, read from the binary in the container;
// the mmap'd zeroed_blocks takes its 10 × 65 faults; nothing is lost.
func TestRecordInprocLiveUserContainer(t *testing.T) {
	cred := asUser(t)
	for _, tool := range []string{"unshare", "ldd", "pivot_root", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: the test builds a container with it", tool)
		}
	}
	progs := buildRecordPrograms(t)
	script, err := filepath.Abs("../../../../testdata/record/container.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir, files := userDir(t, buildFaultline(t), filepath.Join(progs, "sitesvc"), script)
	asCred := func(cmd *exec.Cmd) *exec.Cmd {
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir}
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return cmd
	}
	if out, err := asCred(exec.Command("unshare", "--user", "--map-root-user", "--mount", "true")).CombinedOutput(); err != nil {
		t.Skipf("the user may not make a user and mount namespace (user.max_user_namespaces, kernel.unprivileged_userns_clone or a security module forbid it): %v %s", err, out)
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o777); err != nil {
		t.Fatal(err)
	}
	// In the container: who its root is on the host, its pid, then record
	// and analyze (HOME is the container's /tmp: the host's is not there).
	inner := `while read -r l; do echo "uid_map $l"; done </proc/self/uid_map
echo "pid $$"
export HOME=/tmp
cd /tmp
/srv/faultline record -o /tmp/c.data -- /srv/sitesvc once || exit 1
/srv/faultline analyze -o /tmp/c.pb.gz /tmp/c.data`
	cmd := asCred(exec.Command("unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork",
		"sh", files[2], root, "/bin/sh", "-c", inner))
	cmd.Env = append(cmd.Env, "CONTAINER_FILES="+files[0]+" "+files[1])
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("record in the container: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	uid := os.Getuid()
	if cred != nil {
		uid = int(cred.Uid)
	}
	if want := fmt.Sprintf("uid_map 0 %d 1", uid); !strings.Contains(strings.Join(strings.Fields(stdout.String()), " "), want) {
		t.Errorf("the container's root is not the user %d alone (want %q in its uid_map)", uid, want)
	}
	if !strings.Contains(stdout.String(), "pid 1\n") {
		t.Errorf("the container's shell is not pid 1: no PID namespace of its own")
	}
	if !strings.Contains(stderr.String(), "recording /srv/sitesvc in-process") {
		t.Errorf("record in the container did not record in-process")
	}
	if !strings.Contains(stdout.String(), "Lost samples: none") {
		t.Errorf("the recording in the container lost samples")
	}
	sites := parseSites(stdout.String())
	for _, s := range []struct{ fn, call string }{
		{"big_blocks", "= malloc(4 << 20)"}, {"zeroed_blocks", "= calloc(64, 4096)"},
		{"mid_blocks", "= malloc(40000)"}, {"small_blocks", "= malloc(200)"},
		{"grown_buffer", "= realloc(grown, 2 * n)"}, {"tiny_blocks", "= malloc(40)"},
		{"table_rows", "= malloc(3000)"},
	} {
		site := fmt.Sprintf("%s sitesvc.c:%d", s.fn, sourceLine(t, "sitesvc.c", s.call))
		n, ok := sites[site]
		switch {
		case !ok:
			t.Errorf("no site %q in analyze's table %v", site, sites)
		case s.fn == "zeroed_blocks" && n != 10*65:
			t.Errorf("%s: %d faults; its 10 mmap'd blocks of 65 pages take 650", site, n)
		}
	}
}
