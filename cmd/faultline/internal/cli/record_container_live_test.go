package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/faultline/faultline/perfdata"
)

// container is a program running as testdata/record/container.sh runs it:
// pid 1 of its own PID namespace, in a mount namespace whose root (a tmpfs
// the host never sees) holds the program under /srv and its libraries.
type container struct {
	cmd *exec.Cmd
	pid int // the program's pid on the host
	out *lineLog
}

// lineLog keeps the lines a program writes, as they come.
type lineLog struct {
	mu    sync.Mutex
	lines []string
	first chan struct{} // closed at the first line
}

// logLines reads r's lines into a lineLog until r ends.
func logLines(r io.Reader) *lineLog {
	l := &lineLog{first: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, sc.Text())
			if len(l.lines) == 1 {
				close(l.first)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// Lines returns the lines so far.
func (l *lineLog) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// waitFirst waits up to d for the first line.
func (l *lineLog) waitFirst(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case <-l.first:
		return l.Lines()[0]
	case <-time.After(d):
		t.Fatalf("the program wrote nothing in %v", d)
		return ""
	}
}

// lineField returns the value of NAME=VALUE in line.
func lineField(t *testing.T, line, name string) string {
	t.Helper()
	m := regexp.MustCompile(`\b` + name + `=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s= in %q", name, line)
	}
	return m[1]
}

// startContainer starts program (a file of buildRecordPrograms) with args
// in a container, returning once it has written its first line.
func startContainer(t *testing.T, program string, args ...string) *container {
	t.Helper()
	for _, tool := range []string{"unshare", "ldd", "pivot_root", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: the test builds a container with it", tool)
		}
	}
	script, err := filepath.Abs("../../../../testdata/record/container.sh")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &container{cmd: exec.Command("unshare", append([]string{"--mount", "--pid", "--fork", "sh", script, root, program}, args...)...)}
	c.cmd.Stderr = os.Stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// pid 1 of a namespace ignores what it does not handle: SIGKILL.
		if c.pid > 0 {
			syscall.Kill(c.pid, syscall.SIGKILL)
		}
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	c.out = logLines(out)
	first := c.out.waitFirst(t, 20*time.Second)
	// unshare --fork's child became the program.
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.cmd.Process.Pid, c.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if c.pid, err = strconv.Atoi(strings.TrimSpace(string(kids))); err != nil {
		t.Fatalf("unshare's children %q: %v", kids, err)
	}
	if got := lineField(t, first, "pid"); got != "1" {
		t.Fatalf("the program sees itself as pid %s, not 1: not in a PID namespace of its own", got)
	}
	return c
}

// sourceLine is the line of src (testdata/record/src) holding text.
func sourceLine(t *testing.T, src, text string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../../../testdata/record/src", src))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, text) {
			return i + 1
		}
	}
	t.Fatalf("%s has no line with %q", src, text)
	return 0
}

// TestRecordLiveContainerFromHost records, from the host, the service
// (testdata/record/src/service.c) running in a pivot_root'ed mount and PID
// namespace whose files the host does not have (container.sh): the
// recording names the process by its host pid (the service prints its
// own, 1), maps /srv/service, and analyze names its three allocation sites
// file:line — the lines of their malloc calls in service.c — from the
// binary record read through /proc/PID/root into the build-id cache; the
// big allocations take the faults, 64 pages and the chunk header's each.
// Both ways of reaching it: the shim injected (its copy written into the
// container's /tmp and gone once attached) and uprobes.
func TestRecordLiveContainerFromHost(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	for _, attach := range []string{attachInject, attachUprobe} {
		t.Run(attach, func(t *testing.T) { testRecordContainerFromHost(t, progs, attach) })
	}
}

func testRecordContainerFromHost(t *testing.T, progs, attach string) {
	c := startContainer(t, filepath.Join(progs, "service"), "2", "20000", "1000")
	if _, err := os.Stat("/srv/service"); err == nil {
		t.Fatal("the host has a /srv/service: the test needs a path only the container has")
	}

	out := filepath.Join(t.TempDir(), "ctr.data")
	code, stderr := runRecordMain("-o", out, "-p", strconv.Itoa(c.pid), "--attach", attach, "--duration", "2s")
	if code != ExitOK {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	t.Logf("record:\n%s", stderr)
	if attach == attachInject {
		if strings.Contains(stderr, "cannot attach in-process") || !strings.Contains(stderr, "in-process") {
			t.Errorf("record --attach inject did not attach in-process")
		}
		left, err := filepath.Glob(fmt.Sprintf("/proc/%d/root/tmp/libfaultline-shim*", c.pid))
		if err != nil || len(left) > 0 {
			t.Errorf("the shim's copy left in the container's /tmp: %v %v", left, err)
		}
	}
	if want := fmt.Sprintf("process %d is pid 1 in its own PID namespace", c.pid); !strings.Contains(stderr, want) {
		t.Errorf("record did not say %q", want)
	}

	rd, err := perfdata.Open(out, &perfdata.Options{Order: perfdata.FileOrder})
	if err != nil {
		t.Fatal(err)
	}
	pids := map[uint32]uint64{}
	shimTids := map[uint32]bool{} // the threads the shim's records name
	mapsService := false
	for rd.Next() {
		switch rec := rd.Record().(type) {
		case *perfdata.Sample:
			if rec.Event != nil && !strings.HasPrefix(rec.Event.Name, "faultline:") {
				pids[rec.Pid]++
			}
			if rec.Event != nil && strings.HasPrefix(rec.Event.Name, "faultline:malloc") {
				shimTids[rec.Tid] = true
			}
		case *perfdata.Mmap:
			mapsService = mapsService || (int(rec.Pid) == c.pid && rec.Filename == "/srv/service")
		}
	}
	rd.Close()
	if len(pids) != 1 || pids[uint32(c.pid)] == 0 {
		t.Errorf("samples by pid %v, want all of host pid %d", pids, c.pid)
	}
	if !mapsService {
		t.Errorf("no mapping of /srv/service by pid %d", c.pid)
	}
	// The service's threads live on: each tid named is one of its tasks
	// on the host (the shim writes the container's ids, record the host's).
	for tid := range shimTids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", c.pid, tid)); err != nil {
			t.Errorf("a malloc sample names thread %d, not a thread of %d on the host: %v", tid, c.pid, err)
		}
	}
	if attach == attachInject && len(shimTids) < 2 {
		t.Errorf("malloc samples of %d threads, want the service's 2 workers", len(shimTids))
	}

	sites := summarySites(t, out)
	var total int64
	for _, n := range sites {
		total += n
	}
	for _, s := range []struct {
		fn, call string
	}{{"alloc_big", "malloc(256 << 10)"}, {"alloc_page", "malloc(4096)"}, {"alloc_small", "malloc(64)"}} {
		site := fmt.Sprintf("%s service.c:%d", s.fn, sourceLine(t, "service.c", s.call))
		n, ok := sites[site]
		switch {
		case !ok:
			t.Errorf("no site %q in analyze's table %v", site, sites)
		case s.fn == "alloc_big" && (n == 0 || float64(n) < 0.95*float64(total)):
			t.Errorf("%s took %d of %d faults, want nearly all", site, n, total)
		}
	}
}
