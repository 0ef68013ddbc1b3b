package recorder

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
)

// envSys is the machine with an environment and an effective uid of the
// test's choosing.
type envSys struct {
	OS
	env  map[string]string
	euid int
}

func (e envSys) Getenv(key string) string { return e.env[key] }
func (e envSys) Geteuid() int             { return e.euid }

// TestChooseMethod: what was asked wins or is refused with a
// *MethodError; otherwise -p, -a and --libc take uprobes, and a program
// the loader will preload into (a dynamic ELF that does not define malloc)
// is recorded in-process where the shim is built; a file that is not ELF
// is not.
func TestChooseMethod(t *testing.T) {
	sys := OS{}
	dynamic, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to choose a method for")
	}
	text := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(text, []byte("not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	inproc := MethodInProcess
	if !shim.Supported() {
		inproc = MethodUprobes
	}
	for _, c := range []struct {
		req     MethodRequest
		method  string
		why     string // a part of it
		refused bool
	}{
		{MethodRequest{Method: MethodUprobes, Cmd: dynamic}, MethodUprobes, "as asked", false},
		{MethodRequest{Method: MethodInProcess, Pid: 1}, "", "", true},
		{MethodRequest{Method: MethodInProcess, Cmd: text}, "", "", true},
		{MethodRequest{Method: MethodAuto, Pid: 1}, MethodUprobes, "(-p)", false},
		{MethodRequest{Method: MethodAuto, All: true}, MethodUprobes, "(-a)", false},
		{MethodRequest{Method: MethodAuto, Cmd: dynamic, Libc: "/lib/libc.so.6"}, MethodUprobes, "--libc", false},
		{MethodRequest{Method: MethodAuto, Cmd: text}, MethodUprobes, "not an ELF program", false},
		{MethodRequest{Method: MethodAuto, Cmd: dynamic}, inproc, "", false},
	} {
		method, why, err := ChooseMethod(sys, c.req)
		var me *MethodError
		if c.refused {
			if !errors.As(err, &me) || !strings.HasPrefix(me.Error(), "--method inproc") {
				t.Errorf("%+v: %v, want a *MethodError about --method inproc", c.req, err)
			}
			continue
		}
		if err != nil || method != c.method || !strings.Contains(why, c.why) {
			t.Errorf("%+v: %s (%q), %v; want %s (%q)", c.req, method, why, err, c.method, c.why)
		}
	}
}

// TestCheckExecutable: execve(2)'s refusals, found before any probe is
// added: not a regular file, no execute permission, neither ELF nor #!.
func TestCheckExecutable(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		path string
		want string // "" for no error
	}{
		{dir, "not a regular file"},
		{write("plain", "#!/bin/sh\n", 0o644), "no execute permission"},
		{write("script", "#!/bin/sh\n", 0o755), ""},
		{write("text", "echo hi\n", 0o755), "neither an ELF binary nor a #! script"},
	} {
		err := CheckExecutable(OS{}, c.path)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.path, err, c.want)
		}
	}
}

// TestBuildIDCacheFor: $PERF_BUILDID_DIR wins; under sudo the invoking
// user's ~/.debug (its home as /etc/passwd has it), owned by that user;
// else $HOME's; without a home, an error.
func TestBuildIDCacheFor(t *testing.T) {
	nobodyHome := "/nonexistent"
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Split(line, ":"); len(f) >= 6 && f[2] == "65534" {
				nobodyHome = f[5]
			}
		}
	}
	for _, c := range []struct {
		env      map[string]string
		euid     int
		dir      string
		uid, gid int
	}{
		{map[string]string{"HOME": "/home/u", "PERF_BUILDID_DIR": "/cache"}, 1000, "/cache", -1, -1},
		{map[string]string{"HOME": "/home/u"}, 1000, "/home/u/.debug", -1, -1},
		{map[string]string{"HOME": "/root", "SUDO_UID": "0"}, 0, "/root/.debug", -1, -1},
		{map[string]string{"HOME": "/root", "SUDO_UID": "65534", "SUDO_GID": "65534"}, 0, filepath.Join(nobodyHome, ".debug"), 65534, 65534},
	} {
		got, err := BuildIDCacheFor(envSys{env: c.env, euid: c.euid}, 1<<20)
		if err != nil {
			if c.uid == 65534 {
				t.Logf("no passwd entry for uid 65534 here: %v", err)
				continue
			}
			t.Errorf("%v: %v", c.env, err)
			continue
		}
		if got.Dir != c.dir || got.UID != c.uid || got.GID != c.gid || got.MaxBytes != 1<<20 {
			t.Errorf("%v: dir %s uid %d gid %d max %d, want %s %d %d", c.env, got.Dir, got.UID, got.GID, got.MaxBytes, c.dir, c.uid, c.gid)
		}
	}
	if _, err := BuildIDCacheFor(envSys{env: map[string]string{}, euid: 1000}, 0); err == nil {
		t.Error("no HOME and no PERF_BUILDID_DIR: no error")
	}
}
