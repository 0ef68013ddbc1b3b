package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// TestRecordLiveOthersEndMidRun: while one uprobe recording (A) runs,
// other uprobe recordings of the same libc start and end: B is stopped
// with SIGINT (it closes its perf events and removes its probes), C is
// killed with SIGKILL (the kernel closes its events; its probes stay until
// the next run), D, the next run, removes C's probes as stale, and E
// records system-wide for a moment. The kernel keeps one breakpoint per libc
// offset for all of them, so this is where one session ending could
// disarm another's. A records testdata/record/src/phases.c, which waits
// between its two phases until B to E have ended: the calls of both
// phases, all in one process, must be in A's recording (phases.c's
// arithmetic: N1 mallocs of 100 bytes, N2 of 200, N1 + N2 frees), or
// counted lost.
func TestRecordLiveOthersEndMidRun(t *testing.T) {
	requireLiveRecord(t)
	progs := buildRecordPrograms(t)
	bin := buildFaultline(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const n1, n2 = 2000, 20000
	aData := filepath.Join(dir, "a.data")
	a := exec.Command(bin, "record", "-q", "--method", "uprobe", "-o", aData, "--",
		filepath.Join(progs, "phases"), strconv.Itoa(n1), strconv.Itoa(n2), fifo)
	var aErr bytes.Buffer
	a.Stderr = &aErr
	aOut, err := a.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	aDone := false
	defer func() {
		if !aDone {
			a.Process.Kill()
			a.Wait()
		}
	}()
	// "ready": A's probes are all in place and its first phase is done.
	ready := make(chan error, 1)
	go func() {
		line := make([]byte, 6)
		_, err := io.ReadFull(aOut, line)
		if err == nil && string(line) != "ready\n" {
			err = fmt.Errorf("phases wrote %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("A's program: %v\n%s", err, aErr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("A's program never finished its first phase\n%s", aErr.String())
	}
	aGroup := rec.ProbeGroup(a.Process.Pid)
	aProbes, _ := groupEvents(t, aGroup, func(evs []string) bool { return len(evs) > 0 })
	if len(aProbes) == 0 {
		t.Fatalf("A records, but its group %s is not in tracefs", aGroup)
	}

	// other starts a uprobe recording of a long churn (its program hits
	// the shared breakpoints until it ends) and waits until its probes are
	// in place and its program has had a moment to run.
	other := func(name string) (*exec.Cmd, string) {
		c := exec.Command(bin, "record", "-q", "--method", "uprobe", "-o", filepath.Join(dir, name+".data"), "--",
			filepath.Join(progs, "churn"), "100000000")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		g := rec.ProbeGroup(c.Process.Pid)
		waitForGroup(t, g, c)
		time.Sleep(300 * time.Millisecond)
		return c, g
	}
	b, bGroup := other("b")
	b.Process.Signal(os.Interrupt)
	b.Wait() // 130: record passes the SIGINT on to churn
	if left, ok := groupEvents(t, bGroup, func(evs []string) bool { return len(evs) == 0 }); !ok {
		t.Errorf("B removed its probes at SIGINT, yet %v are left", left)
	}
	c, cGroup := other("c")
	c.Process.Kill()
	c.Wait()
	// C's probes stay until a run removes them: D, or any other record
	// that starts meanwhile (another test, another user).
	d, err := exec.Command(bin, "record", "--method", "uprobe", "-o", filepath.Join(dir, "d.data"), "--", "/bin/true").CombinedOutput()
	if err != nil {
		t.Errorf("D: %v\n%s", err, d)
	}
	t.Logf("D removed C's probes: %v", strings.Contains(string(d), "removed the probes of "+cGroup))
	if left, ok := groupEvents(t, cGroup, func(evs []string) bool { return len(evs) == 0 }); !ok {
		t.Errorf("C's probes after D ran: %v, want none", left)
	}
	// E records system-wide: its probes are armed in every process that
	// maps the libc, A's included, and disarmed everywhere when it ends,
	// but where another session still wants them.
	if e, err := exec.Command(bin, "record", "-q", "--method", "uprobe", "-a", "--duration", "300ms", "-o", filepath.Join(dir, "e.data")).CombinedOutput(); err != nil {
		t.Errorf("E (-a): %v\n%s", err, e)
	}
	if left, ok := groupEvents(t, aGroup, func(evs []string) bool { return slices.Equal(evs, aProbes) }); !ok {
		t.Errorf("A's probes after B to E ended: %v, want %v", left, aProbes)
	}

	release(t, fifo)
	err = a.Wait()
	aDone = true
	if err != nil {
		t.Fatalf("A: %v\n%s", err, aErr.String())
	}
	calls, bySize, _ := callCounts(t, aData)
	_, lost, _ := countSamples(t, aData)
	got := map[string]uint64{"malloc(100)": sum(bySize[100]), "malloc(200)": sum(bySize[200]), "free": calls["free"]}
	want := map[string]uint64{"malloc(100)": n1, "malloc(200)": n2, "free": n1 + n2}
	lostOf := map[string]uint64{"malloc(100)": lost[aGroup+":malloc"], "malloc(200)": lost[aGroup+":malloc"], "free": lost[aGroup+":free"]}
	t.Logf("A recorded %v, counted lost: malloc %d, free %d", got, lost[aGroup+":malloc"], lost[aGroup+":free"])
	for k, w := range want {
		switch g := got[k]; {
		case g > w:
			t.Errorf("%s: %d calls recorded; phases.c makes %d", k, g, w)
		case g+lostOf[k] < w:
			t.Errorf("%s: %d calls recorded and %d counted lost; phases.c makes %d: %d missed without a count", k, g, lostOf[k], w, w-g-lostOf[k])
		}
	}
}

// waitForGroup waits until the probe group of the record cmd is in
// tracefs.
func waitForGroup(t *testing.T, group string, cmd *exec.Cmd) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if len(rec.ParseProbeGroups(uprobeEvents(t))[group]) > 0 {
			return
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("record (pid %d) never added its probes", cmd.Process.Pid)
		}
	}
}

// groupEvents reads group's events from uprobe_events until ok accepts
// them, five reads at most: a read while another process removes probes
// can skip lines that are still there (uprobe_events is a seq_file), and
// other tests may be adding and removing theirs.
func groupEvents(t *testing.T, group string, ok func([]string) bool) ([]string, bool) {
	t.Helper()
	var evs []string
	for try := 0; try < 5; try++ {
		if try > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if evs = rec.ParseProbeGroups(uprobeEvents(t))[group]; ok(evs) {
			return evs, true
		}
	}
	return evs, false
}

// release writes a byte to fifo once its reader (phases.c) has opened it.
func release(t *testing.T, fifo string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			_, err = f.WriteString("g")
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			t.Fatalf("the recorded program never opened %s: %v", fifo, err)
		}
	}
}
