package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// noiseFixtures is testdata/diffnoise (its gen.sh): profiles of real runs
// of a C, a C++ and a Python program, each run twice unchanged (a, b), with
// its buffer doubled (buf) and with its loop allocating twice as much
// (loop), and the C program rebuilt with a comment line added above its
// allocations (c-moved).
const noiseFixtures = "../../../../testdata/diffnoise"

type noiseSite struct {
	Site       string `json:"site"`
	Base       int64  `json:"base"`
	New        int64  `json:"new"`
	Regression bool   `json:"regression"`
}

// noiseDiff runs faultline diff --format json over fixture profiles and
// returns its exit status and the sites that regressed.
func noiseDiff(t *testing.T, args ...string) (int, []noiseSite) {
	t.Helper()
	for i, a := range args {
		if strings.HasSuffix(a, ".pb.gz") {
			args[i] = filepath.Join(noiseFixtures, a)
		}
	}
	code, out, errOut := runCLI(append([]string{"diff", "--format", "json"}, args...)...)
	if code != ExitOK && code != ExitRegression {
		t.Fatalf("diff %v: exit %d: %s", args, code, errOut)
	}
	var res struct{ Sites []noiseSite }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("diff %v: %v\n%s", args, err, out)
	}
	var reg []noiseSite
	for _, s := range res.Sites {
		if s.Regression {
			reg = append(reg, s)
		}
	}
	return code, reg
}

// TestDiffNoise checks diff on committed profiles: two runs of
// one deterministic program diff to exit 0 in C, C++ and Python; a moved
// line does too (and fails with --key line, as before); a doubled buffer
// or loop exits 1 and names its site. The growth is the programs'
// arithmetic (src/): the buffer is 2 MiB, 512 pages, and doubles; the loop
// allocates 20000 48-byte nodes (C, 64-byte chunks: 312.5 pages) or 5000
// map entries with 40-byte strings (C++), and doubles.
func TestDiffNoise(t *testing.T) {
	for _, lang := range []string{"c", "cxx", "py"} {
		if code, reg := noiseDiff(t, lang+"-a.pb.gz", lang+"-b.pb.gz"); code != ExitOK {
			t.Errorf("%s: two identical runs: exit %d, regressions %+v", lang, code, reg)
		}
	}
	if code, reg := noiseDiff(t, "c-a.pb.gz", "c-moved.pb.gz"); code != ExitOK {
		t.Errorf("c: a moved line: exit %d, regressions %+v", code, reg)
	}
	if code, reg := noiseDiff(t, "--key", "line", "c-a.pb.gz", "c-moved.pb.gz"); code != ExitRegression || len(reg) != 2 {
		t.Errorf("c: a moved line with --key line: exit %d, regressions %+v; want 1 and both moved sites", code, reg)
	}
	for _, tc := range []struct {
		args   []string
		sites  []string // prefixes of the regressed sites' names
		lo, hi int64    // each one's growth in faults
	}{
		{[]string{"c-a.pb.gz", "c-buf.pb.gz"}, []string{"make_buffer alloc.c:16 "}, 510, 514},
		{[]string{"c-a.pb.gz", "c-loop.pb.gz"}, []string{"make_list alloc.c:28 "}, 310, 316},
		// Several baselines: the doubling still fails.
		{[]string{"c-a.pb.gz", "c-b.pb.gz", "--", "c-buf.pb.gz"}, []string{"make_buffer alloc.c:16 "}, 510, 514},
		{[]string{"cxx-a.pb.gz", "cxx-buf.pb.gz"}, []string{"app::fill alloc.cpp:18 (via std::vector::push_back) "}, 1000, 1030},
		// 5000 entries more: 5000×80 B map nodes (98 pages) and 5000×64 B
		// string chunks (78 pages), give or take the heap's growth.
		{[]string{"cxx-a.pb.gz", "cxx-loop.pb.gz"}, []string{"app::index", "app::index"}, 70, 105},
		{[]string{"py-a.pb.gz", "py-buf.pb.gz"}, []string{"python3.11+0x"}, 505, 515},
		{[]string{"py-a.pb.gz", "py-loop.pb.gz"}, []string{"python3.11+0x"}, 20, 100},
	} {
		code, reg := noiseDiff(t, tc.args...)
		if code != ExitRegression || len(reg) != len(tc.sites) {
			t.Errorf("%v: exit %d, regressions %+v; want 1 and %d", tc.args, code, reg, len(tc.sites))
			continue
		}
		for i, s := range reg {
			if d := s.New - s.Base; !strings.HasPrefix(s.Site, tc.sites[i]) || d < tc.lo || d > tc.hi {
				t.Errorf("%v: regressed %q by %d, want %q by %d to %d", tc.args, s.Site, d, tc.sites[i], tc.lo, tc.hi)
			}
		}
	}
}
