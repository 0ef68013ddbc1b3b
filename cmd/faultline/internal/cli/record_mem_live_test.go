package cli

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
)

// analyzeLive analyzes a live recording with this machine's files.
func analyzeLive(t *testing.T, path string) *analyze.Result {
	t.Helper()
	r, err := perfdata.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sess, err := symbolize.NewSession(symbolize.Config{}, r.Meta())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := analyze.Run(r, sess, analyze.Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRecordLiveMemPhases records testdata/mem/src/phases.c with both
// methods and checks the resident memory against arithmetic on the
// program (TestResidentPhases explains it): big64 holds its 16384 pages
// (and the pages malloc took on its own memory for the call) at the peak;
// the re-faults are at least own_map's 1024 (madvise) + 2048 (the second
// mapping lies in the unmapped first); the tracked peak is within 5% of
// the program's own peak RssAnon, which record measured.
func TestRecordLiveMemPhases(t *testing.T) {
	requireLiveRecord(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc) to build testdata/mem/src/phases.c")
	}
	dir := t.TempDir()
	bin := buildOnce(t, "phases", func(bin string) *exec.Cmd {
		return exec.Command("cc", "-O2", "-g", "-o", bin, "../../../../testdata/mem/src/phases.c")
	})
	for _, method := range []string{"inproc", "uprobe"} {
		t.Run(method, func(t *testing.T) {
			out := filepath.Join(dir, method+".data")
			if code, stderr := runRecordMain("-q", "--method", method, "-o", out, "--", bin); code != 0 {
				t.Fatalf("record exited %d: %s", code, stderr)
			}
			checkMemPhases(t, analyzeLive(t, out))
		})
	}
}

// checkMemPhases checks an analysis of a recording of phases.c
// (TestRecordLiveMemPhases says what against).
func checkMemPhases(t *testing.T, res *analyze.Result) {
	t.Helper()
	p := res.Profile
	peakI, faultI := report.ValueIndex(p, report.SampleResidentPeak), report.ValueIndex(p, report.SampleFaults)
	var big64Peak, big64Inside int64
	for _, s := range p.Sample {
		if report.SampleName(s, false) == "" || len(s.Location) == 0 {
			continue
		}
		ln := s.Location[0].Line
		if len(ln) == 0 || ln[len(ln)-1].Function.Name != "big64" {
			continue
		}
		big64Peak += s.Value[peakI]
		if len(s.Label[report.InsideLabel]) > 0 {
			big64Inside += s.Value[faultI]
		}
	}
	if want := (16384 + big64Inside) * 4096; big64Peak != want {
		t.Errorf("big64 holds %d bytes at the peak, want %d (16384 pages + %d malloc took on its own memory)", big64Peak, want, big64Inside)
	}
	rs := &res.Summary.Resident
	if rs.Refaults < 1024+2048 {
		t.Errorf("%d re-faults, want at least %d", rs.Refaults, 1024+2048)
	}
	if rs.ProcessAnon == 0 || rs.ProcessHWM == 0 {
		t.Fatalf("the recording has no faultline:rss (anon %d, hwm %d)", rs.ProcessAnon, rs.ProcessHWM)
	}
	ratio := float64(rs.PeakBytes) / float64(rs.ProcessAnon)
	t.Logf("tracked peak %d bytes, process peak RssAnon %d (%.1f%%), ru_maxrss %d", rs.PeakBytes, rs.ProcessAnon, 100*ratio, rs.ProcessHWM)
	if ratio < 0.95 || ratio > 1.05 {
		t.Errorf("tracked peak %d bytes is %.1f%% of the process's peak RssAnon %d, want within 5%%", rs.PeakBytes, 100*ratio, rs.ProcessAnon)
	}
}
