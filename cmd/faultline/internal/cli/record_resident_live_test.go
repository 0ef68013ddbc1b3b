package cli

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/attribute/report"
)

// residentTruth is what testdata/record/src/resident.c wrote about itself:
// per buffer (a, b, c, d) its size and, at its peak and before it exits,
// the bytes of it in resident pages (mincore) and in transparent huge
// pages (kpageflags); smaps_rollup's Anonymous and AnonHugePages then; the
// fork child's pid and its Private_Dirty in a.
type residentTruth struct {
	size                   map[string]int64
	peak, exit, peakTHP    map[string]int64
	peakAnon, exitAnon     int64
	peakHuge               int64
	childPid, childPrivate int64
}

func readResidentTruth(t *testing.T, path string) *residentTruth {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := &residentTruth{size: map[string]int64{}, peak: map[string]int64{}, exit: map[string]int64{}, peakTHP: map[string]int64{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var when, name string
		var size, res, thp, anon, huge int64
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "child "):
			fmt.Sscanf(l, "child pid %d private_dirty %d", &tr.childPid, &tr.childPrivate)
		case strings.Contains(l, " buf "):
			if _, err := fmt.Sscanf(l, "%s buf %s size %d resident %d thp %d", &when, &name, &size, &res, &thp); err != nil {
				t.Fatalf("%s: %q: %v", path, l, err)
			}
			tr.size[name] = size
			if when == "peak" {
				tr.peak[name], tr.peakTHP[name] = res, thp
			} else {
				tr.exit[name] = res
			}
		default:
			if _, err := fmt.Sscanf(l, "%s rollup_anon %d anonhuge %d", &when, &anon, &huge); err != nil {
				t.Fatalf("%s: %q: %v", path, l, err)
			}
			if when == "peak" {
				tr.peakAnon, tr.peakHuge = anon, huge
			} else {
				tr.exitAnon = anon
			}
		}
	}
	return tr
}

// siteValues sums the profile's values of each sample type by buffer: the
// samples whose site is alloc_a … alloc_d.
func siteValues(t *testing.T, res *analyze.Result) map[string]map[string]int64 {
	t.Helper()
	p := res.Profile
	out := map[string]map[string]int64{}
	for _, s := range p.Sample {
		name := report.SampleSiteName(s, false)
		buf, ok := strings.CutPrefix(name, "alloc_")
		if !ok || len(buf) < 1 {
			continue
		}
		buf = buf[:1]
		if out[buf] == nil {
			out[buf] = map[string]int64{}
		}
		for i, st := range p.SampleType {
			out[buf][st.Type] += s.Value[i]
		}
	}
	return out
}

// within reports whether got is within pct percent of want, or within
// slack bytes of it.
func within(got, want int64, pct float64, slack int64) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= slack || float64(d) <= pct/100*float64(want)
}

// TestRecordLiveResident records testdata/record/src/resident.c, which
// reports its own residency (mincore per buffer, kpageflags' huge pages,
// smaps_rollup), with transparent huge pages off for it (nothp), advised
// on two buffers (advise), on its whole heap (always), a half-written
// buffer collapsed into huge pages (collapse) and a child writing half of
// an inherited buffer (fork), by both methods, and checks per buffer:
// resident_peak and resident_end within 2% of mincore's; huge/bytes
// within 2 MiB of kpageflags'; untouched/bytes = size − resident at the
// end of its life, exactly; the summed resident within 2% of
// smaps_rollup's Anonymous; the program's huge pages under record, per
// buffer and outside them, within one huge page of its own natively; the
// fork child's own pages within 2% of its Private_Dirty.
func TestRecordLiveResident(t *testing.T) {
	requireLiveRecord(t)
	if _, err := os.Stat("/proc/kpageflags"); err != nil {
		t.Skip("no /proc/kpageflags: the program cannot say which pages are huge")
	}
	bin := filepath.Join(buildRecordPrograms(t), "resident")
	dir := t.TempDir()
	for _, mode := range []string{"nothp", "advise", "always", "collapse", "fork"} {
		native := filepath.Join(dir, mode+".native")
		if out, err := exec.Command(bin, mode, native).CombinedOutput(); err != nil {
			t.Fatalf("%s natively: %v %s", mode, err, out)
		}
		nt := readResidentTruth(t, native)
		for _, method := range []string{"inproc", "uprobe"} {
			t.Run(mode+"/"+method, func(t *testing.T) {
				truth := filepath.Join(dir, mode+"."+method+".truth")
				data := filepath.Join(dir, mode+"."+method+".data")
				if code, stderr := runRecordMain("-q", "--method", method, "-o", data, "--", bin, mode, truth); code != 0 {
					t.Fatalf("record exited %d: %s", code, stderr)
				}
				tr := readResidentTruth(t, truth)
				res := analyzeLive(t, data)
				checkResident(t, mode, tr, nt, res)
			})
		}
	}
}

func checkResident(t *testing.T, mode string, tr, native *residentTruth, res *analyze.Result) {
	t.Helper()
	sites := siteValues(t, res)
	const page = 4096
	for _, b := range []string{"a", "b", "c", "d"} {
		v := sites[b]
		if v == nil {
			t.Errorf("no site alloc_%s in the profile", b)
			continue
		}
		// A site's figures are its pages in every process: the fork
		// child's copies of a are a's too.
		var child int64
		if b == "a" {
			child = tr.childPrivate
		}
		if got, want := v[report.SampleResidentPeak], tr.peak[b]+child; !within(got, want, 2, 2*page) {
			t.Errorf("buffer %s: resident_peak %d, mincore at the peak %d", b, got, want)
		}
		if got, want := v[report.SampleResidentEnd], tr.exit[b]+child; !within(got, want, 2, 2*page) {
			t.Errorf("buffer %s: resident_end %d, mincore at exit %d", b, got, want)
		}
		if got, want := v[report.SampleHuge], tr.peakTHP[b]; !within(got, want, 0, 2<<20) {
			t.Errorf("buffer %s: huge %d, huge pages at the peak (kpageflags) %d", b, got, want)
		}
		end := tr.exit[b]
		if b == "a" {
			end = tr.peak[b] // freed after the peak
		}
		t.Logf("%s: resident_peak %d (mincore %d), resident_end %d (%d), huge %d (kpageflags %d), untouched %d (size − resident %d)",
			b, v[report.SampleResidentPeak], tr.peak[b]+child, v[report.SampleResidentEnd], tr.exit[b]+child,
			v[report.SampleHuge], tr.peakTHP[b], v[report.SampleUntouched], tr.size[b]-end)
		if got, want := v[report.SampleUntouched], tr.size[b]-end; got != want {
			t.Errorf("buffer %s: untouched %d, size − resident at its end %d", b, got, want)
		}
	}
	rs := &res.Summary.Resident
	if rs.Snapshots == nil || rs.Snapshots.Exits == 0 {
		t.Errorf("no snapshot at an exit: %+v", rs.Snapshots)
	}
	if mode != "fork" {
		if !within(rs.PeakBytes, tr.peakAnon, 2, 0) {
			t.Errorf("resident peak %d, smaps_rollup Anonymous at the program's peak %d", rs.PeakBytes, tr.peakAnon)
		}
		if !within(rs.EndBytes, tr.exitAnon, 2, 0) {
			t.Errorf("resident at the end %d, smaps_rollup Anonymous at exit %d", rs.EndBytes, tr.exitAnon)
		}
	}
	// The program's huge pages under record are those it has natively:
	// each buffer's bytes in huge pages within one huge page of its own
	// natively (where a buffer's mapping lands, 2 MiB-aligned or not,
	// moves its count by one page from run to run), and AnonHugePages
	// outside the buffers within one huge page too.
	var bufHuge, nativeBufHuge int64
	for _, b := range []string{"a", "b", "c", "d"} {
		bufHuge += tr.peakTHP[b]
		nativeBufHuge += native.peakTHP[b]
		if !within(tr.peakTHP[b], native.peakTHP[b], 0, 2<<20) {
			t.Errorf("buffer %s: %d bytes in huge pages under record, %d natively", b, tr.peakTHP[b], native.peakTHP[b])
		}
	}
	if !within(tr.peakHuge-bufHuge, native.peakHuge-nativeBufHuge, 0, 2<<20) {
		t.Errorf("AnonHugePages outside the buffers under record %d (of %d), natively %d (of %d)", tr.peakHuge-bufHuge, tr.peakHuge, native.peakHuge-nativeBufHuge, native.peakHuge)
	}
	if mode == "fork" {
		found := false
		for _, p := range rs.Processes {
			if int64(p.Pid) == tr.childPid {
				found = true
				if !within(p.PeakBytes, tr.childPrivate, 2, 0) {
					t.Errorf("the child's own resident peak %d, its Private_Dirty in the buffer %d", p.PeakBytes, tr.childPrivate)
				}
			}
		}
		if !found {
			t.Errorf("no figures for the child (pid %d): %+v", tr.childPid, rs.Processes)
		}
	}
	t.Logf("%s: peak %d (rollup %d), end %d (rollup %d), AnonHugePages %d (natively %d), snapshots %+v", mode, rs.PeakBytes, tr.peakAnon, rs.EndBytes, tr.exitAnon, tr.peakHuge, native.peakHuge, rs.Snapshots)
}

// TestRecordLiveMakeProcesses records make -j2 compiling the record
// programs' C sources (make, sh, gcc, cc1, as: some twenty processes) and
// checks that no process's tracked peak is above its own peak RSS (its
// VmHWM, read as it exited) and that the program's own figure compares
// make's own pages with make's own RSS, not every process's with one.
func TestRecordLiveMakeProcesses(t *testing.T) {
	requireLiveRecord(t)
	for _, tool := range []string{"make", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	dir := t.TempDir()
	srcs, _ := filepath.Glob("../../../../testdata/record/src/*.c")
	if len(srcs) == 0 {
		t.Fatal("no C sources in testdata/record/src")
	}
	for _, s := range srcs {
		copyFile(t, s, filepath.Join(dir, filepath.Base(s)))
	}
	mk := "OBJS := $(patsubst %.c,%.o,$(wildcard *.c))\nall: $(OBJS)\n%.o: %.c\n\tgcc -O2 -g -c $< -o $@\n"
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(mk), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "make.data")
	if code, stderr := runRecordMain("-q", "-o", data, "--", "make", "-s", "-j2", "-C", dir); code != 0 {
		t.Fatalf("record exited %d: %s", code, stderr)
	}
	rs := analyzeLive(t, data).Summary.Resident
	if len(rs.Processes) < len(srcs) {
		t.Errorf("%d processes with resident pages, want at least one cc1 per source (%d)", len(rs.Processes), len(srcs))
	}
	measured := 0
	for _, p := range rs.Processes {
		if p.HWM == 0 {
			continue
		}
		measured++
		if p.PeakBytes > p.HWM {
			t.Errorf("pid %d %s: tracked peak %d above its own peak RSS %d (%.1f%%)", p.Pid, p.Comm, p.PeakBytes, p.HWM, 100*float64(p.PeakBytes)/float64(p.HWM))
		}
	}
	if measured < len(srcs) {
		t.Errorf("only %d processes had their own RSS read", measured)
	}
	if rs.ProcessAnon > 0 && rs.OwnPeakBytes > rs.ProcessAnon+rs.ProcessAnon/50 {
		t.Errorf("make's own tracked peak %d against its peak anonymous RSS %d", rs.OwnPeakBytes, rs.ProcessAnon)
	}
	t.Logf("%d processes, %d with their own RSS; make: own peak %d, anon RSS %d", len(rs.Processes), measured, rs.OwnPeakBytes, rs.ProcessAnon)
}
