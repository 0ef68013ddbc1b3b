package cli

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/attribute/report/reporttest"
)

// siteCounts analyzes a recording and sums allocations and faults (those
// the allocator took serving a call, inside=allocator, aside) per site.
func siteCounts(t *testing.T, data string) map[string][2]int64 {
	t.Helper()
	pb := data + ".pb.gz"
	if _, stderr, code := runMain(t, nil, "analyze", "-q", "-o", pb, data); code != ExitOK {
		t.Fatalf("analyze %s: exit %d\n%s", data, code, stderr)
	}
	out := map[string][2]int64{}
	for _, s := range reporttest.Read(t, pb).Sample {
		n := report.SampleSiteName(s, false)
		c := out[n]
		c[0] += s.Value[1]
		if len(s.Label[report.InsideLabel]) == 0 {
			c[1] += s.Value[0]
		}
		out[n] = c
	}
	return out
}

// TestRecordInprocLiveFamilies records a C program (testdata/alloc's
// alloc.c) and a C++ one (testdata/record's containers.cpp: vector, map,
// string, list, threads) under jemalloc, tcmalloc and mimalloc, linked and
// in LD_PRELOAD, with record's default method, which must be in-process
// (the family's shim object), and compares each site's allocations and
// faults with the uprobe method's recordings of the linked program (the
// reference, two runs of uprobes on the allocator's own functions); as
// root, both are recorded as a user too. Allocations must be
// equal within 0.1%, faults within 0.5% (compareSites).
//
// Every run has the allocator's time-based release turned off
// (timelessEnv): mimalloc returns the pages of freed memory to the kernel
// 25 ms after the free (its decommit_delay), jemalloc after its decay
// time, and the uprobe method, a trap per call, makes the program run long
// enough for that to happen: its reference then holds faults on re-touched
// released pages that a program running at full speed never takes
// (mimalloc's containers.cpp: 549 more faults, 547 of them labelled
// refault=yes by analyze). With the release off the faults of a run do not
// depend on its speed.
func TestRecordInprocLiveFamilies(t *testing.T) {
	requireLiveRecord(t)
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++")
	}
	const l = "/usr/lib/x86_64-linux-gnu/"
	progs := []struct{ name, compiler, src string }{
		{"c", cc, "../../../../testdata/alloc/src/alloc.c"},
		{"cxx", cxx, "../../../../testdata/record/src/containers.cpp"},
	}
	dir := t.TempDir()
	for _, fam := range []struct{ name, lib, link, preload, timeless string }{
		{"jemalloc", l + "libjemalloc.so", "-ljemalloc", l + "libjemalloc.so.2", "MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1"},
		{"tcmalloc", l + "libtcmalloc_minimal.so", "-ltcmalloc_minimal", l + "libtcmalloc_minimal.so.4", ""},
		{"mimalloc", l + "libmimalloc.so", "-lmimalloc", l + "libmimalloc.so.2", "MIMALLOC_ALLOW_DECOMMIT=0"},
	} {
		for _, p := range progs {
			t.Run(fam.name+"-"+p.name, func(t *testing.T) {
				if _, err := os.Stat(fam.lib); err != nil {
					t.Skipf("%s is not installed (apt-get install libjemalloc-dev libgoogle-perftools-dev libmimalloc-dev)", fam.lib)
				}
				src, err := filepath.Abs(p.src)
				if err != nil {
					t.Fatal(err)
				}
				var userEnv []string
				if k, v, ok := strings.Cut(fam.timeless, "="); ok {
					t.Setenv(k, v)
					userEnv = append(userEnv, fam.timeless)
				}
				linked := buildOnce(t, "fam-"+fam.name+"-"+p.name, func(bin string) *exec.Cmd {
					return exec.Command(p.compiler, "-O2", "-g", "-pthread", "-o", bin, src, fam.link)
				})
				plain := buildOnce(t, "fam-plain-"+p.name, func(bin string) *exec.Cmd {
					return exec.Command(p.compiler, "-O2", "-g", "-pthread", "-o", bin, src)
				})
				// Two reference runs: the uprobe method samples stacks 1 in
				// N per CPU, so with threads which calls carry a stack,
				// and so the site inferred for the rest, varies from run
				// to run; a site matches if it matches either run.
				var ref [2]map[string][2]int64
				for i := range ref {
					up := filepath.Join(dir, fam.name+"-"+p.name+"-uprobe"+strconv.Itoa(i)+".data")
					if code, stderr := runRecordMain("-q", "--method", "uprobe", "-o", up, "--", linked); code != ExitOK {
						t.Fatalf("uprobe: exit %d\n%s", code, stderr)
					}
					ref[i] = siteCounts(t, up)
				}
				for _, mode := range []string{"linked", "preload"} {
					bin := linked
					if mode == "preload" {
						bin = plain
						t.Setenv("LD_PRELOAD", fam.preload)
					}
					in := filepath.Join(dir, fam.name+"-"+p.name+"-"+mode+".data")
					code, stderr := runRecordMain("-o", in, "--", bin)
					os.Unsetenv("LD_PRELOAD")
					if code != ExitOK {
						t.Fatalf("%s: exit %d\n%s", mode, code, stderr)
					}
					if !strings.Contains(stderr, "in-process: the calls of its allocator, "+fam.name) {
						t.Errorf("%s: record did not record %s in-process:\n%s", mode, fam.name, stderr)
					}
					got := siteCounts(t, in)
					compareSites(t, mode, ref, got)
					checkFreesOnce(t, mode, stderr, got)
				}
				// As a user (no root, no tracefs), the linked program and
				// the glibc build with the allocator in LD_PRELOAD.
				if os.Geteuid() == 0 {
					if cred := userCred(); cred != nil {
						dir, bins := userDir(t, buildFaultline(t), linked, plain)
						for _, mode := range []string{"linked", "preload"} {
							in := filepath.Join(dir, "user-"+mode+".data")
							env := append([]string{"PATH=/usr/bin:/bin", "HOME=" + dir, "PERF_BUILDID_DIR=" + filepath.Join(dir, "cache")}, userEnv...)
							bin := bins[1]
							if mode == "preload" {
								bin = bins[2]
								env = append(env, "LD_PRELOAD="+fam.preload)
							}
							cmd := exec.Command(bins[0], "record", "-o", in, "--", bin)
							cmd.Env = env
							cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
							out, err := cmd.CombinedOutput()
							if err != nil {
								t.Fatalf("record as a user, %s: %v\n%s", mode, err, out)
							}
							if !strings.Contains(string(out), "in-process: the calls of its allocator, "+fam.name) {
								t.Errorf("as a user, %s: not in-process:\n%s", mode, out)
							}
							compareSites(t, "user "+mode, ref, siteCounts(t, in))
							checkFreesOnce(t, "user "+mode, string(out), siteCounts(t, in))
						}
					}
				}
			})
		}
	}
}

// compareSites compares per-site allocations (within 0.1%) and faults
// (within 0.5% at sites with at least 200, where that is a fault or more)
// of an in-process recording with the uprobe method's; a site matches if
// it matches either reference run. Smaller sites are logged: jemalloc's
// containers.cpp moves a few faults between its small sites from run to
// run with either method.
func compareSites(t *testing.T, mode string, refs [2]map[string][2]int64, got map[string][2]int64) {
	t.Helper()
	near := func(g, r int64) bool { return math.Abs(float64(g-r)) <= 0.001*float64(r) }
	for site, r := range refs[0] {
		if strings.HasPrefix(site, "[") || r[0] < 10 {
			continue // classes, and sites of the runtime's few start-up calls
		}
		g, r1 := got[site], refs[1][site]
		if !near(g[0], r[0]) && !near(g[0], r1[0]) {
			t.Errorf("%s: %s: %d allocations in-process, %d and %d in two runs with uprobes", mode, site, g[0], r[0], r1[0])
		}
		nearFaults := func(r int64) bool { return math.Abs(float64(g[1]-r)) <= 0.005*float64(r) }
		if r[1] >= 200 && !nearFaults(r[1]) && !nearFaults(r1[1]) {
			t.Errorf("%s: %s: %d faults in-process, %d and %d in two runs with uprobes", mode, site, g[1], r[1], r1[1])
		}
		t.Logf("%s: %s: allocations %d / %d, faults %d / %d (in-process / uprobes)", mode, site, g[0], r[0], g[1], r[1])
	}
}

// checkFreesOnce: each free is recorded once, also where the allocator's
// free entry points call one another through its PLT (mimalloc's operator
// delete calls mi_free: each delete was recorded twice). The programs
// free what they allocate, so the frees record's event table counts are
// at most the allocations analyze counts, and a few frees of memory the
// C library allocated for itself.
func checkFreesOnce(t *testing.T, mode, stderr string, sites map[string][2]int64) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s+faultline:free\s+(\d+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Errorf("%s: no faultline:free line in record's event table:\n%s", mode, stderr)
		return
	}
	frees, _ := strconv.ParseInt(m[1], 10, 64)
	var allocs int64
	for _, c := range sites {
		allocs += c[0]
	}
	if frees > allocs+allocs/100+100 {
		t.Errorf("%s: %d frees recorded for %d allocations", mode, frees, allocs)
	}
	t.Logf("%s: %d frees recorded, %d allocations", mode, frees, allocs)
}

// TestRecordInprocLiveNoFamilySymbols: a glibc program that looks up
// jemalloc's mallocx, tcmalloc's tc_malloc and mimalloc's mi_malloc with
// dlsym(RTLD_DEFAULT) finds none of them under record, as without it (the
// shim object for glibc defines none): the program prints what it found.
func TestRecordInprocLiveNoFamilySymbols(t *testing.T) {
	if testing.Short() {
		t.Skip("records live; skipped with -short")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "probe.c")
	os.WriteFile(src, []byte(`#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
	const char *names[] = {"mallocx", "tc_malloc", "mi_malloc", "sdallocx"};
	free(malloc(10));
	for (int i = 0; i < 4; i++)
		printf("%s=%s\n", names[i], dlsym(RTLD_DEFAULT, names[i]) ? "found" : "NULL");
	return 0;
}
`), 0o644)
	bin := filepath.Join(dir, "probe")
	if out, err := exec.Command(cc, "-O1", "-o", bin, src, "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	want, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(want), "found") {
		t.Skipf("this machine's C library defines a family's symbol:\n%s", want)
	}
	out := filepath.Join(dir, "p.data")
	cmd := exec.Command(buildFaultline(t), "record", "--method", "inproc", "-o", out, "--", bin)
	cmd.Env = append(os.Environ(), "PERF_BUILDID_DIR="+filepath.Join(dir, "cache"))
	got, err := cmd.Output()
	if err != nil {
		t.Skipf("record --method inproc did not run here (perf events?): %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("under record the program printed\n%swithout it\n%s", got, want)
	}
}

// TestRecordInprocLiveFamilyMissingEntry: where the allocator lacks one
// of the table's entry points (mimalloc has no nothrow operator delete),
// the next definition is libstdc++'s, which calls one the shim records:
// each call is recorded once. The program (below) allocates 1000 blocks
// with nothrow operator new and frees them with nothrow operator delete.
func TestRecordInprocLiveFamilyMissingEntry(t *testing.T) {
	requireLiveRecord(t)
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++")
	}
	const lib = "/usr/lib/x86_64-linux-gnu/libmimalloc.so"
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("%s is not installed (apt-get install libmimalloc-dev)", lib)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "nothrow.cpp")
	os.WriteFile(src, []byte(`#include <new>
int main() {
	for (int i = 0; i < 1000; i++) {
		char *volatile p = static_cast<char *>(operator new(100, std::nothrow));
		p[0] = 1;
		operator delete(p, std::nothrow);
	}
	return 0;
}
`), 0o644)
	bin := filepath.Join(dir, "nothrow")
	if out, err := exec.Command(cxx, "-O1", "-o", bin, src, "-lmimalloc").CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "n.data")
	if code, stderr := runRecordMain("-q", "-o", data, "--", bin); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	calls, _, _ := callCounts(t, data)
	if calls["op_new_nothrow"] != 1000 || calls["free"] != 1000 {
		t.Errorf("op_new_nothrow %d, free %d; the program makes 1000 of each (all calls: %v)", calls["op_new_nothrow"], calls["free"], calls)
	}
}
