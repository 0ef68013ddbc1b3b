package cli

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/attribute/report/reporttest"
)

// siteWork is one site's allocations and faults in a profile.
type siteWork struct{ allocs, faults int64 }

// workSites analyzes a recording and sums allocations and faults per site
// (every fault charged to the allocation it touched, those the allocator
// took serving the call too), for the sites of src's functions but main.
func workSites(t *testing.T, data, src string) map[string]siteWork {
	t.Helper()
	pb := data + ".pb.gz"
	if _, stderr, code := runMain(t, nil, "analyze", "-q", "-o", pb, data); code != ExitOK {
		t.Fatalf("analyze %s: exit %d\n%s", data, code, stderr)
	}
	p := reporttest.Read(t, pb)
	fi, ai := report.ValueIndex(p, report.SampleFaults), report.ValueIndex(p, report.SampleAllocs)
	sites := map[string]siteWork{}
	for _, s := range p.Sample {
		name := report.SampleSiteName(s, false)
		if !strings.Contains(name, " "+src+":") || strings.HasPrefix(name, "main ") {
			continue
		}
		w := sites[name]
		w.allocs += s.Value[ai]
		w.faults += s.Value[fi]
		sites[name] = w
	}
	return sites
}

// siteFaultSlack is how far a site's faults in an attached window may
// differ from a launched recording's: 0.5%, and at least 2. A site's heap
// memory is a run of pages whose first and last page it can share with
// what the process allocated before it, and that differs between the two
// processes by the allocations of the shim's loading (its dlopen in the
// attached process, the preload in the launched one): each end of the run
// can take its page's fault or leave it to a neighbour. mmap'd blocks
// have pages of their own and agree exactly.
func siteFaultSlack(n int64) float64 {
	return max(2, 0.005*float64(n))
}

// TestRecordAttachLiveSameWork records the same work of sitesvc
// (testdata/record/src/sitesvc.c: seven sites in three threads, from 6
// mmap'd 4 MiB blocks to 1500 fastbin chunks, every byte written) twice:
// launched (record -- sitesvc once) and in a window of record -p attached
// in-process to the running service, the work started by a SIGUSR1 sent
// once the shim is attached (its watcher thread exists). Every site's
// allocations are equal, the window holds exactly the calls the service
// counted for the work, and every site's faults agree within
// siteFaultSlack (the mmap'd zeroed_blocks' with arithmetic too).
func TestRecordAttachLiveSameWork(t *testing.T) {
	progs := requireInproc(t)
	prog := filepath.Join(progs, "sitesvc")
	dir := t.TempDir()

	launched := filepath.Join(dir, "launched.data")
	stdout, stderr, code := runMain(t, nil, "record", "-q", "-o", launched, "--", prog, "once")
	if code != ExitOK {
		t.Fatalf("record -- sitesvc once: exit %d\n%s", code, stderr)
	}
	calls := workCalls(t, strings.Split(strings.TrimSpace(stdout), "\n"))

	svc := startService(t, prog)
	pid := svc.cmd.Process.Pid
	attached := filepath.Join(dir, "attached.data")
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := Main([]string{"record", "-p", strconv.Itoa(pid), "--duration", "3s", "-o", attached},
			&Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
		done <- result{code, errb.String()}
	}()
	if !awaitAttached(pid) {
		t.Fatal("the shim's watcher thread did not start in the service in 10 s: record did not attach in-process")
	}
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != ExitOK || !strings.Contains(r.stderr, "in-process") || strings.Contains(r.stderr, "cannot attach") {
		t.Fatalf("record -p: exit %d, not in-process:\n%s", r.code, r.stderr)
	}
	lines := svc.snapshot()
	if len(lines) < 2 {
		t.Fatalf("the service had not finished its work when record's 3 s ended: %q", lines)
	}
	if got := workCalls(t, lines); got != calls {
		t.Fatalf("the service made %d calls for its work, launched it made %d", got, calls)
	}

	// A recording that lost samples (counted: record fell behind, as on a
	// loaded machine) has fewer faults at some sites: say so rather than
	// compare them.
	for _, data := range []string{launched, attached} {
		for _, ev := range recordedEvents(t, data) {
			if ev.Lost > 0 {
				t.Fatalf("%s lost %d of %d %s samples, counted: record fell behind; the sites cannot be compared", filepath.Base(data), ev.Lost, ev.Samples+ev.Lost, ev.Name)
			}
		}
	}
	ls, as := workSites(t, launched, "sitesvc.c"), workSites(t, attached, "sitesvc.c")
	var inWindow int64
	for _, w := range as {
		inWindow += w.allocs
	}
	if inWindow != calls {
		t.Errorf("the attached window holds %d allocations at sitesvc's sites, the service counted %d", inWindow, calls)
	}
	if len(ls) < 7 {
		t.Fatalf("the launched recording has %d of sitesvc's sites: %v", len(ls), ls)
	}
	// Arithmetic both must meet: zeroed_blocks' 10 calloc'd blocks of 256
	// KiB are mmap'd (above the fixed 128 KiB threshold), 64 pages and the
	// header's each.
	for n, w := range as {
		if strings.HasPrefix(n, "zeroed_blocks ") && (w.faults != 10*65 || ls[n].faults != 10*65) {
			t.Errorf("%s: %d faults attached, %d launched; its 10 blocks of 65 pages take 650", n, w.faults, ls[n].faults)
		}
	}
	for n := range as {
		if _, ok := ls[n]; !ok {
			t.Errorf("%s: %+v in the attached window, not in the launched recording", n, as[n])
		}
	}
	for _, n := range slices.Sorted(maps.Keys(ls)) {
		l, a := ls[n], as[n]
		t.Logf("%-36s allocs %6d / %6d  faults %5d / %5d (launched / attached)", n, l.allocs, a.allocs, l.faults, a.faults)
		if a.allocs != l.allocs {
			t.Errorf("%s: %d allocations attached, %d launched", n, a.allocs, l.allocs)
		}
		if math.Abs(float64(a.faults-l.faults)) > siteFaultSlack(l.faults) {
			t.Errorf("%s: %d faults attached, %d launched (at most %.0f apart)", n, a.faults, l.faults, siteFaultSlack(l.faults))
		}
	}
}

// workCalls reads sitesvc's "round 1 calls C minflt F" line among lines.
func workCalls(t *testing.T, lines []string) int64 {
	t.Helper()
	for _, l := range lines {
		var calls, minflt int64
		if n, _ := fmt.Sscanf(l, "round 1 calls %d minflt %d", &calls, &minflt); n == 2 {
			return calls
		}
	}
	t.Fatalf("sitesvc printed no round 1 line: %q", lines)
	return 0
}
