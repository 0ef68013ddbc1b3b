package analyze

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
)

// TestResidentPhases checks the resident memory of testdata/mem's
// recording (perf record with perf's own syscalls:sys_*_mmap, … events;
// src/phases.c) against arithmetic on the program and on perf script's
// lines of its memory-map calls (mapcalls.txt, written by gen.sh):
//
//   - big64 touches 64 MiB / 4096 = 16384 pages of its malloc(64 MiB),
//     all held when the total peaks: resident_peak = 16384 × 4096 bytes
//     (plus the pages malloc took on its own memory for the call), and
//     none at the end (freed: glibc's munmap);
//   - the peak falls while big64's mapping is live: between the return of
//     its mmap (len 0x4001000) and its munmap, as perf script times them;
//   - big32's 32 MiB mapping lies inside big64's released range
//     (mapcalls.txt: 0x7ffff5dd1000+0x2001000 within
//     0x7ffff3dd1000+0x4001000): its 8192 faults are all re-faults;
//   - own_map's first mapping (16 MiB) lies there too: 4096 re-faults,
//     then 1024 more after madvise(DONTNEED) of its first 4 MiB; the
//     second (8 MiB) is the top half of the first, unmapped: 2048
//     re-faults, all resident at the end (8 MiB), named via=mmap;
//   - small's 2000 × malloc(1000) are kept: its pages are resident at the
//     end, its faults (the pages of the brk heap it grew) are as many.
func TestResidentPhases(t *testing.T) {
	files := symbolize.Config{Symfs: "../../testdata/mem/symfs", Getenv: func(string) string { return "" }}
	res := analyzePath(t, "../../testdata/mem/phases.data", files, Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc})
	p := res.Profile
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	vi := func(typ string) int {
		i := report.ValueIndex(p, typ)
		if i < 0 {
			t.Fatalf("profile has no %s sample type", typ)
		}
		return i
	}
	peakI, endI, faultI := vi(report.SampleResidentPeak), vi(report.SampleResidentEnd), vi(report.SampleFaults)
	type tot struct{ peak, end, faults, refaults int64 }
	sites := map[string]*tot{}
	inside := map[string]int64{} // faults malloc took on its own memory for the site's calls
	for _, s := range p.Sample {
		if len(s.Label[report.ClassLabel]) > 0 {
			continue
		}
		name := leafFunc(s)
		if len(s.Label[report.InsideLabel]) > 0 {
			inside[name] += s.Value[faultI]
		}
		if sites[name] == nil {
			sites[name] = &tot{}
		}
		st := sites[name]
		st.peak += s.Value[peakI]
		st.end += s.Value[endI]
		if len(s.Label[report.InsideLabel]) == 0 {
			st.faults += s.Value[faultI]
		}
		if report.IsRefault(s) {
			st.refaults += s.Value[faultI]
			if name == "own_map" && len(s.Label[report.ViaLabel]) == 0 || name == "own_map" && s.Label[report.ViaLabel][0] != report.ViaMmap {
				t.Errorf("own_map's sample has via %v, want [mmap]", s.Label[report.ViaLabel])
			}
		}
	}
	const page = 4096
	// A page malloc touched on its own memory serving big64's call
	// (inside=allocator: outside the chunk) is the site's too, and stays
	// resident after the chunk's munmap.
	want := map[string]tot{
		"big64":   {peak: (16384 + inside["big64"]) * page, end: inside["big64"] * page, faults: 16384, refaults: 0},
		"big32":   {peak: 0, end: 0, faults: 8192, refaults: 8192},
		"own_map": {peak: 0, end: 2048 * page, faults: 4096 + 1024 + 2048, refaults: 4096 + 1024 + 2048},
	}
	for name, w := range want {
		got := sites[name]
		if got == nil {
			t.Errorf("no site %s in the profile", name)
			continue
		}
		if *got != w {
			t.Errorf("%s: got peak %d end %d faults %d refaults %d, want %+v", name, got.peak, got.end, got.faults, got.refaults, w)
		}
	}
	if s := sites["small"]; s == nil || s.end != s.faults*page || s.peak != 0 {
		t.Errorf("small: %+v, want its faults' pages resident at the end and none at the peak", s)
	}

	rs := &res.Summary.Resident
	mmapAt, munmapAt := mapCallTimes(t, "../../testdata/mem/mapcalls.txt", "0x04001000")
	peak := rs.Start + rs.PeakTime
	if peak < mmapAt || peak > munmapAt {
		t.Errorf("peak at %d ns, want within big64's mapping [%d, %d] (perf script)", peak, mmapAt, munmapAt)
	}
	if len(rs.AtPeak) == 0 || !strings.HasPrefix(rs.AtPeak[0].Name, "big64 ") {
		t.Errorf("top site at the peak: %+v, want big64 first", rs.AtPeak)
	}
	if rs.Refaults != 8192+4096+1024+2048 {
		t.Errorf("re-faults %d, want %d", rs.Refaults, 8192+4096+1024+2048)
	}
}

// leafFunc is the outermost function of a sample's leaf location (the
// site's, after inlining).
func leafFunc(s *profile.Sample) string {
	if len(s.Location) == 0 || len(s.Location[0].Line) == 0 {
		return ""
	}
	ln := s.Location[0].Line
	return ln[len(ln)-1].Function.Name
}

// mapCallTimes reads perf script's lines (mapcalls.txt) for the mmap whose
// len is length: the time its sys_exit_mmap returned and the time of the
// munmap of the address it returned, in ns.
func mapCallTimes(t *testing.T, path, length string) (mapped, unmapped uint64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ns := func(field string) uint64 {
		sec, frac, _ := strings.Cut(strings.TrimSuffix(field, ":"), ".")
		s, _ := strconv.ParseUint(sec, 10, 64)
		u, _ := strconv.ParseUint(frac, 10, 64)
		return s*1e9 + u*1e3 // perf script prints µs
	}
	sc := bufio.NewScanner(f)
	want, addr := false, ""
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		switch {
		case fs[3] == "syscalls:sys_enter_mmap:" && strings.Contains(sc.Text(), "len: "+length+","):
			want = true
		case want && fs[3] == "syscalls:sys_exit_mmap:":
			mapped, addr, want = ns(fs[2]), fs[4], false
		case addr != "" && fs[3] == "syscalls:sys_enter_munmap:" && strings.Contains(sc.Text(), "addr: "+addr+","):
			return mapped, ns(fs[2])
		}
	}
	t.Fatalf("%s: no mmap of len %s and its munmap", path, length)
	return 0, 0
}
