package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/attribute/report/reporttest"
)

// TestRecordLiveEveryAllocator records testdata/alloc/src/alloc.c with
// record's defaults (no --libc) under each allocator this machine has:
// glibc shared and static, jemalloc, tcmalloc and mimalloc preloaded and
// linked (and statically where Debian ships the archive). Each needs the
// allocator's Debian package (libjemalloc-dev, libgoogle-perftools-dev,
// libmimalloc-dev); a missing one skips its case with a message.
//
// Expected (alloc.c's loops): fill_small alloc.c:19 has 20000
// allocations, never mmap; big_buffer alloc.c:26 one allocation with 2048
// faults on its pages (faults the allocator took serving the call, labelled
// inside=allocator, aside); testdata/alloc/README.md has the strace
// evidence for which allocators mmap the 8 MiB block.
func TestRecordLiveEveryAllocator(t *testing.T) {
	requireLiveRecord(t)
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	const l = "/usr/lib/x86_64-linux-gnu/"
	src, err := filepath.Abs("../../../../testdata/alloc/src/alloc.c")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		needs   string   // a file the case needs
		link    []string // gcc arguments after the source
		preload string
		mmap    bool
	}{
		{"glibc", l + "libc.so.6", nil, "", true},
		{"glibc-static", l + "libc.a", []string{"-static"}, "", true},
		{"jemalloc-preload", l + "libjemalloc.so.2", nil, l + "libjemalloc.so.2", true},
		{"jemalloc", l + "libjemalloc.so", []string{"-ljemalloc"}, "", true},
		{"jemalloc-static", l + "libjemalloc_pic.a", []string{l + "libjemalloc_pic.a", "-lpthread", "-lm", "-ldl", "-lstdc++"}, "", true},
		{"tcmalloc-preload", l + "libtcmalloc_minimal.so.4", nil, l + "libtcmalloc_minimal.so.4", false},
		{"tcmalloc", l + "libtcmalloc_minimal.so", []string{"-ltcmalloc_minimal"}, "", false},
		{"tcmalloc-static", l + "libtcmalloc_minimal.a", []string{l + "libtcmalloc_minimal.a", "-lpthread", "-lstdc++", "-lm"}, "", false},
		{"mimalloc-preload", l + "libmimalloc.so.2", nil, l + "libmimalloc.so.2", false},
		{"mimalloc", l + "libmimalloc.so", []string{"-lmimalloc"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.needs); err != nil {
				t.Skipf("%s is not installed (apt-get install libjemalloc-dev libgoogle-perftools-dev libmimalloc-dev)", tc.needs)
			}
			bin := buildOnce(t, "alloc-"+tc.name, func(bin string) *exec.Cmd {
				return exec.Command(cc, append([]string{"-O2", "-g", "-o", bin, src}, tc.link...)...)
			})
			data, pb := filepath.Join(dir, tc.name+".data"), filepath.Join(dir, tc.name+".pb.gz")
			if tc.preload != "" {
				t.Setenv("LD_PRELOAD", tc.preload)
			}
			code, stderr := runRecordMain("-o", data, "--", bin)
			os.Unsetenv("LD_PRELOAD")
			if code != ExitOK {
				t.Fatalf("record: exit %d\n%s", code, stderr)
			}
			// record names the allocator it recorded.
			family := strings.SplitN(tc.name, "-", 2)[0]
			if !strings.Contains(stderr, family) {
				t.Errorf("record does not name %s:\n%s", family, stderr)
			}
			if _, aerr, code := runMain(t, nil, "analyze", "-q", "-o", pb, data); code != ExitOK {
				t.Fatalf("analyze: exit %d\n%s", code, aerr)
			}
			p := reporttest.Read(t, pb)
			type site struct {
				allocs, faults int64
				mmap           bool
			}
			sites := map[string]*site{}
			for _, s := range p.Sample {
				n := report.SampleSiteName(s, false)
				st := sites[n]
				if st == nil {
					st = &site{}
					sites[n] = st
				}
				st.allocs += s.Value[1]
				if len(s.Label[report.InsideLabel]) == 0 {
					st.faults += s.Value[0]
				}
				for _, fl := range s.Label["flag"] {
					st.mmap = st.mmap || fl == "mmap"
				}
			}
			small, big := sites["fill_small alloc.c:19"], sites["big_buffer alloc.c:26"]
			if small == nil || big == nil {
				t.Fatalf("sites fill_small alloc.c:19 and big_buffer alloc.c:26 not both in the profile:\n%s", stderr)
			}
			if small.allocs != 20000 || small.mmap {
				t.Errorf("fill_small: %d allocations, mmap %v; want 20000, not mmap", small.allocs, small.mmap)
			}
			if big.allocs != 1 || big.faults < 2048*99/100 || big.faults > 2048*101/100 || big.mmap != tc.mmap {
				t.Errorf("big_buffer: %d allocations, %d faults on it, mmap %v; want 1, 2048 +- 1%%, mmap %v", big.allocs, big.faults, big.mmap, tc.mmap)
			}
		})
	}
}
