package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report/reporttest"
)

var correlateData = filepath.Join("..", "..", "..", "..", "attribute", "correlate", "testdata")

func TestCorrelateCommand(t *testing.T) {
	dir := t.TempDir()
	pairs, prof := filepath.Join(dir, "pairs.tsv"), filepath.Join(dir, "faults.pb.gz")
	out, errOut, code := runMain(t, nil, "correlate", "--maps", filepath.Join(correlateData, "access.tt.log.maps"),
		"--symfs", filepath.Join(correlateData, "symfs"), "--pairs", pairs, "-o", prof,
		filepath.Join(correlateData, "access.tt.log"), filepath.Join(correlateData, "faults.trace"))
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(pairs)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	ip := 0
	for _, r := range rows[1:] {
		if strings.Split(r, "\t")[6] == "ip" {
			ip++
		}
	}
	// The summary counts what the pairs file lists.
	for _, want := range []string{"Faults:      " + itoa(len(rows)-1) + " (ftrace)", "matched by ip+page:", " " + itoa(ip) + " ", "Clock:       offset", "Threads:     compared"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	p := reporttest.Read(t, prof)
	if p.Mapping[0].File != "/tmp/fl_correlate_gen/selftrace" {
		t.Errorf("first mapping %q, want the program", p.Mapping[0].File)
	}

	// The fault log on standard input, the pairs on standard output: the
	// summary moves to stderr.
	trace, err := os.ReadFile(filepath.Join(correlateData, "faults.trace"))
	if err != nil {
		t.Fatal(err)
	}
	out2, errOut2, code := runMain(t, trace, "correlate", "--pairs", "-", filepath.Join(correlateData, "access.tt.log"), "-")
	if code != ExitOK || out2 != string(b) || !strings.Contains(errOut2, "matched by ip+page:") {
		t.Errorf("stdin: exit %d, pairs equal %v, stderr %q", code, out2 == string(b), errOut2)
	}
	// -q: nothing but errors.
	out3, errOut3, code := runMain(t, nil, "correlate", "-q", filepath.Join(correlateData, "access.tt.log"), filepath.Join(correlateData, "faults.trace"))
	if code != ExitOK || out3 != "" || errOut3 != "" {
		t.Errorf("-q: exit %d, stdout %q, stderr %q", code, out3, errOut3)
	}
}

func TestCorrelateErrors(t *testing.T) {
	acc, tr := filepath.Join(correlateData, "access.tt.log"), filepath.Join(correlateData, "faults.trace")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"correlate", "-", "-"}, "only one of ACCESSLOG and FAULTLOG"},
		{[]string{"correlate", acc}, "want ACCESSLOG FAULTLOG"},
		{[]string{"correlate", "--threads", "x", acc, tr}, "want auto, match or ignore"},
		{[]string{"correlate", "--offset", "soon", acc, tr}, "--offset"},
		{[]string{"correlate", acc, acc}, "no page faults"},
		{[]string{"correlate", tr, tr}, "access log line"},
		{[]string{"correlate", "--comm", "nobody", acc, tr}, "left out by --pid/--comm"},
	} {
		_, errOut, code := runMain(t, nil, tc.args...)
		if code != ExitFailure || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
