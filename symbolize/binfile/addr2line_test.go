package binfile

// Agreement tests against GNU addr2line (binutils): every expected function
// name, inline chain and file:line here comes from
//
//	addr2line -a -f -i -C -e FILE ADDR...
//
// run live when addr2line is installed, else read from the golden files in
// testdata (written with -update, which records the exact command).

import (
	"bufio"
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the addr2line golden files in testdata")

type a2lFrame struct {
	Func, Loc string
}

// sampleText returns every step-th address of the .text section of f.
func sampleText(t testing.TB, f *elf.File, step uint64) []uint64 {
	s := f.Section(".text")
	if s == nil {
		t.Fatal("no .text")
	}
	var out []uint64
	for a := s.Addr; a < s.Addr+s.Size; a += step {
		out = append(out, a)
	}
	return out
}

// runAddr2line runs addr2line on addrs, in batches to keep command lines short.
func runAddr2line(file string, addrs []uint64) ([]byte, error) {
	return runSymbolizer("addr2line", []string{"-a", "-f", "-i", "-C", "-e", file}, addrs)
}

// runSymbolizer runs tool with args and addrs, in batches to keep command
// lines short.
func runSymbolizer(tool string, base []string, addrs []uint64) ([]byte, error) {
	var out bytes.Buffer
	for len(addrs) > 0 {
		n := min(len(addrs), 4000)
		args := append([]string(nil), base...)
		for _, a := range addrs[:n] {
			args = append(args, fmt.Sprintf("%#x", a))
		}
		cmd := exec.Command(tool, args...)
		cmd.Stdout = &out
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: %v: %s", tool, err, stderr.Bytes())
		}
		addrs = addrs[n:]
	}
	return out.Bytes(), nil
}

// parseAddr2line reads addr2line -a -f -i output: an address line, then
// function/location pairs, innermost first.
func parseAddr2line(data []byte) (map[uint64][]a2lFrame, error) {
	res := map[uint64][]a2lFrame{}
	var cur uint64
	var pending string
	havePending := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "0x") && !havePending {
			a, err := strconv.ParseUint(line[2:], 16, 64)
			if err != nil {
				return nil, err
			}
			cur = a
			res[cur] = nil
			continue
		}
		if !havePending {
			pending, havePending = line, true
			continue
		}
		res[cur] = append(res[cur], a2lFrame{Func: pending, Loc: line})
		havePending = false
	}
	return res, sc.Err()
}

var discriminator = regexp.MustCompile(` \(discriminator \d+\)$`)

func normLoc(loc string) string {
	loc = discriminator.ReplaceAllString(loc, "")
	if loc == "??:0" {
		return "??:?"
	}
	// binutils joins DW_AT_comp_dir, the directory entry and the file name
	// without cleaning ("./csu/./csu/init-first.c"); debug/dwarf cleans.
	// binutils 2.40 also joins comp_dir with DWARF 5 directory entry 0,
	// which already is the compilation directory ("./csu/./csu/x.c"); undo
	// that doubling.
	if i := strings.LastIndexByte(loc, ':'); i > 0 && loc[:i] != "??" {
		p := path.Clean(loc[:i])
		if j := strings.IndexByte(p, '/'); j > 0 && strings.HasPrefix(p[j+1:], p[:j+1]) {
			p = p[j+1:]
		}
		loc = p + loc[i:]
	}
	return loc
}

func ourLoc(f Frame) string {
	file, line := f.File, "?"
	if file == "" {
		file = "??"
	}
	if f.Line != 0 {
		line = strconv.Itoa(f.Line)
	}
	return file + ":" + line
}

func ourFunc(f Frame) string {
	if f.Func == Unknown {
		return "??"
	}
	return f.Func
}

type agreement struct {
	n, names, chains, locs int
	padding                int // excluded: see compareWithAddr2line
	badNames               []string
	bad                    []string
}

func (a agreement) String() string {
	pct := func(k int) float64 { return 100 * float64(k) / float64(max(a.n, 1)) }
	return fmt.Sprintf("%d addresses (+%d padding excluded): function name %.2f%%, full inline chain (names+file:line) %.2f%%, innermost file:line %.2f%%",
		a.n, a.padding, pct(a.names), pct(a.chains), pct(a.locs))
}

// compareWithAddr2line symbolizes every address of want and counts agreement.
func compareWithAddr2line(b *Binary, want map[uint64][]a2lFrame, addrs []uint64) agreement {
	var a agreement
	var buf []Frame
	for _, addr := range addrs {
		exp, ok := want[addr]
		if !ok || len(exp) == 0 {
			continue
		}
		buf = b.Symbolize(addr, buf[:0])
		got := buf
		// Between functions (alignment padding, never executed) addr2line
		// names the preceding symbol whatever its size; perf, like us,
		// respects sizes and says [unknown]. Such addresses never occur in
		// a stack, so they are counted apart.
		if len(got) == 1 && got[0].Func == Unknown && len(exp) == 1 && b.syms.lookup(addr) == nil {
			a.padding++
			continue
		}
		a.n++
		if ourFunc(got[len(got)-1]) == exp[len(exp)-1].Func {
			a.names++
		} else {
			a.badNames = append(a.badNames, fmt.Sprintf("%#x: got %q want %q", addr, ourFunc(got[len(got)-1]), exp[len(exp)-1].Func))
		}
		if ourLoc(got[0]) == normLoc(exp[0].Loc) {
			a.locs++
		}
		same := len(got) == len(exp)
		for i := 0; same && i < len(got); i++ {
			same = ourFunc(got[i]) == exp[i].Func && ourLoc(got[i]) == normLoc(exp[i].Loc)
		}
		if same {
			a.chains++
		} else if len(a.bad) < 15 {
			var g, e []string
			for _, f := range got {
				g = append(g, ourFunc(f)+" "+ourLoc(f))
			}
			for _, f := range exp {
				e = append(e, f.Func+" "+normLoc(f.Loc))
			}
			a.bad = append(a.bad, fmt.Sprintf("%#x:\n\tgot  %s\n\twant %s", addr, strings.Join(g, " <- "), strings.Join(e, " <- ")))
		}
	}
	return a
}

// addr2lineExpect returns addr2line's answers for addrs of file, live if
// addr2line is installed (rewriting golden with -update), else from golden.
func addr2lineExpect(t *testing.T, file, golden, what string, addrs []uint64) map[uint64][]a2lFrame {
	t.Helper()
	if *update || hasAddr2line() {
		out, err := runAddr2line(file, addrs)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			hdr := fmt.Sprintf("# generated by: go test -run %s -update (binutils addr2line)\n# command: addr2line -a -f -i -C -e %s %s\n",
				t.Name(), file, what)
			if err := os.WriteFile(golden, append([]byte(hdr), out...), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		m, err := parseAddr2line(out)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("committed golden file missing (addr2line would regenerate it): %v", err)
	}
	m, err := parseAddr2line(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestFixtureAgreesWithAddr2line(t *testing.T) {
	for _, tc := range []struct {
		name, bin, a2lFile string
	}{
		{"inline", "testdata/inline", "testdata/inline"},
		{"stripped+debuglink", "testdata/inline.stripped", "testdata/inline.debug"},
		{"cxx", "testdata/cxx", "testdata/cxx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Locator{}
			abs, _ := filepath.Abs(tc.bin)
			b, err := l.Open(abs, "")
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, w := range b.Warnings {
				t.Logf("warning: %s", w)
			}
			if !b.HasDWARF() {
				t.Fatalf("no DWARF found for %s", tc.bin)
			}
			addrs := sampleText(t, b.ELF(), 7)
			golden := "testdata/" + filepath.Base(tc.a2lFile) + ".addr2line"
			want := addr2lineExpect(t, tc.a2lFile, golden, "<every 7th byte of .text>", addrs)
			a := compareWithAddr2line(b, want, addrs)
			t.Logf("agreement with addr2line: %v", a)
			for _, s := range a.bad {
				t.Log(s)
			}
			if a.names*100 < a.n*99 || a.chains*100 < a.n*99 {
				t.Errorf("agreement below 99%%: %v", a)
			}
		})
	}
}

// hasAddr2line reports whether addr2line can be run;
// FAULTLINE_TEST_NO_ADDR2LINE=1 forces the golden files.
func hasAddr2line() bool {
	if os.Getenv("FAULTLINE_TEST_NO_ADDR2LINE") != "" {
		return false
	}
	_, err := exec.LookPath("addr2line")
	return err == nil
}
