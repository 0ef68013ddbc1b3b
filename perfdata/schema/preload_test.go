package schema

import (
	"reflect"
	"testing"
)

// TestPreloadCheck feeds the kernel's records as an in-process recording
// of `sh -c 'app; env LD_PRELOAD= app; su nobody -c app'` would hold them:
// the launcher (its program the shim itself), sh with the shim and the
// rings, app the same, app without the shim, app with the shim but no
// rings, and a process still running at the end without the shim.
func TestPreloadCheck(t *testing.T) {
	var c PreloadCheck
	const shim, rings = "/memfd:faultline-shim (deleted)", "/memfd:faultline-rings (deleted)"
	c.Exec(10, "11") // the shim's launcher, executed from its memfd
	c.Mmap(10, "[stack]")
	c.Mmap(10, shim)
	c.Mmap(10, "/usr/lib/ld.so")
	c.Exec(10, "sh")
	for _, f := range []string{"[stack]", "/usr/bin/dash", "/usr/lib/ld.so", shim, "/usr/lib/libc.so.6", "//anon", rings} {
		c.Mmap(10, f)
	}
	c.Exec(11, "app")
	for _, f := range []string{"/tmp/app", "/tmp/faultline-shim-1/libfaultline-shim.so", rings} {
		c.Mmap(11, f)
	}
	c.Exit(11)
	c.Exec(12, "app")
	c.Mmap(12, "/tmp/app")
	c.Mmap(12, "/usr/lib/libc.so.6")
	c.Exit(12)
	c.Exec(13, "app")
	c.Mmap(13, "/tmp/app")
	c.Mmap(13, "/tmp/faultline-shim-1/libfaultline-shim.so")
	c.Exit(13)
	c.Exec(14, "late")
	c.Mmap(14, "/tmp/late")
	missed, detached := c.Result()
	if want := []ExecProcess{{12, "app"}, {14, "late"}}; !reflect.DeepEqual(missed, want) {
		t.Errorf("missed %v, want %v", missed, want)
	}
	if want := []ExecProcess{{13, "app"}}; !reflect.DeepEqual(detached, want) {
		t.Errorf("detached %v, want %v", detached, want)
	}
	if got := NameProcesses(append(missed, missed...)); got != "app 12, late 14, app 12, late 14" {
		t.Errorf("NameProcesses: %q", got)
	}

	// No process mapped the shim: not an in-process recording.
	var u PreloadCheck
	u.Exec(1, "app")
	u.Mmap(1, "/tmp/app")
	if m, d := u.Result(); m != nil || d != nil {
		t.Errorf("uprobe recording: %v %v", m, d)
	}
}
