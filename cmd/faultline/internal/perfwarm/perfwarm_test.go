package perfwarm

import (
	"os"
	"strconv"
	"sync"
	"testing"
)

func TestWanted(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"faultline", "record", "--", "true"}, true},
		{[]string{"faultline", "record"}, true},
		{[]string{"faultline", "analyze", "record"}, false},
		{[]string{"faultline"}, false},
		{[]string{"faultline-guard", "/proc/1/fd/3"}, false},
	} {
		if got := wanted(c.args); got != c.want {
			t.Errorf("wanted(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

// TestOpenRelease: open leaves a perf event open (the kernel's
// anon_inode:[perf_event] behind the descriptor), which Release closes.
func TestOpenRelease(t *testing.T) {
	<-done // this test binary's init opened nothing
	if fd != -1 {
		t.Fatalf("init opened an event (fd %d) in a process that is not record", fd)
	}
	fd, done, release = -1, make(chan struct{}), sync.Once{}
	open()
	if fd < 0 {
		t.Skip("perf_event_open refused an event on this process (perf_event_paranoid?)")
	}
	path := "/proc/self/fd/" + strconv.Itoa(fd)
	if link, err := os.Readlink(path); err != nil || link != "anon_inode:[perf_event]" {
		t.Fatalf("the event's descriptor is %q (%v), want anon_inode:[perf_event]", link, err)
	}
	Release()
	Release() // a second call does nothing
	if link, err := os.Readlink(path); err == nil && link == "anon_inode:[perf_event]" {
		t.Errorf("Release left the event open")
	}
	if fd != -1 {
		t.Errorf("fd is %d after Release, want -1", fd)
	}
}
