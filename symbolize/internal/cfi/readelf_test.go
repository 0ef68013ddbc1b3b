package cfi

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// The expected rows in these tests come from binutils readelf
// (`readelf --debug-dump=frames-interp`, i.e. -wF), an independent
// implementation of the same CFI interpreter.

// x86-64 DWARF register names as readelf prints them.
var x86RegNames = map[string]int{
	"rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7,
	"r8": 8, "r9": 9, "r10": 10, "r11": 11, "r12": 12, "r13": 13, "r14": 14, "r15": 15,
	"ra": 16, "rip": 16,
}

type readelfRow struct {
	loc   uint64
	cfa   string
	cells map[int]string
}

type readelfFDE struct {
	section    string
	off        uint64
	begin, end uint64
	rows       []readelfRow
}

// parseReadelfFrames parses `readelf -wF` output. Only FDEs are returned;
// FDEs whose program has no advance print no rows.
func parseReadelfFrames(r io.Reader) ([]readelfFDE, error) {
	var out []readelfFDE
	var cur *readelfFDE
	var cols []int
	sec := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Contents of the ") {
			f := strings.Fields(line)
			sec = f[3]
			cur = nil
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) >= 6 && f[3] == "FDE" && strings.HasPrefix(f[5], "pc=") {
			off, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("bad FDE line %q", line)
			}
			pcs := strings.Split(strings.TrimPrefix(f[5], "pc="), "..")
			b, _ := strconv.ParseUint(pcs[0], 16, 64)
			e, _ := strconv.ParseUint(pcs[1], 16, 64)
			out = append(out, readelfFDE{section: sec, off: off, begin: b, end: e})
			cur = &out[len(out)-1]
			continue
		}
		if len(f) >= 4 && f[3] == "CIE" || len(f) >= 2 && f[1] == "ZERO" {
			cur = nil
			continue
		}
		if cur == nil {
			continue
		}
		if f[0] == "LOC" {
			cols = cols[:0]
			for _, name := range f[2:] {
				reg, ok := x86RegNames[name]
				if !ok {
					reg = -1 // a register faultline does not track
					if strings.HasPrefix(name, "r") {
						if n, err := strconv.Atoi(name[1:]); err == nil {
							reg = n
						}
					}
				}
				cols = append(cols, reg)
			}
			continue
		}
		loc, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil || len(f) < 2 {
			continue
		}
		row := readelfRow{loc: loc, cfa: f[1], cells: map[int]string{}}
		// A register rule prints as two tokens, "r9 (r9)": keep the first.
		var vals []string
		for _, v := range f[2:] {
			if strings.HasPrefix(v, "(") && len(vals) > 0 {
				continue
			}
			vals = append(vals, v)
		}
		for i, v := range vals {
			if i < len(cols) && cols[i] >= 0 {
				row.cells[cols[i]] = v
			}
		}
		cur.rows = append(cur.rows, row)
	}
	return out, sc.Err()
}

func x86RegName(r int) string {
	for n, v := range x86RegNames {
		if v == r && n != "ra" && n != "rip" {
			return n
		}
	}
	if r == 16 {
		return "rip"
	}
	return fmt.Sprintf("r%d", r)
}

// readelfCell formats a rule the way readelf -wF prints it. Same-value,
// offset, val-offset and register rules are spelled as Row.String spells
// them (s, c-8, v+16, r6), so those cells check that spelling too.
func readelfCell(rule Rule, isCFA bool) string {
	switch rule.Kind {
	case RuleUnspecified, RuleUndefined:
		return "u"
	case RuleSameValue, RuleOffset, RuleValOffset, RuleRegister:
		return (&Row{}).fmtRule(rule)
	case RuleExpression:
		return "exp"
	case RuleValExpression:
		if isCFA {
			return "exp"
		}
		return "vexp"
	case RuleRegOffset:
		return fmt.Sprintf("%s%+d", x86RegName(int(rule.Reg)), rule.Offset)
	}
	return "?"
}

// crossCheck compares every row readelf prints for path with Table.Find.
func crossCheck(t *testing.T, path string, frames io.Reader) {
	t.Helper()
	secs, err := elfSections(perftest.OpenELF(t, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	withHdr, err := New(secs)
	if err != nil {
		t.Fatal(err)
	}
	// The same CFI indexed by scanning .eh_frame instead of through
	// .eh_frame_hdr's table must give the same answers.
	secs.EhFrameHdr = nil
	scanned, err := New(secs)
	if err != nil {
		t.Fatal(err)
	}
	fdes, err := parseReadelfFrames(frames)
	if err != nil {
		t.Fatal(err)
	}
	if len(fdes) == 0 {
		t.Fatalf("%s: readelf printed no FDEs", path)
	}
	for _, tab := range []*Table{withHdr, scanned} {
		crossCheckTable(t, path, tab, fdes)
	}
}

func crossCheckTable(t *testing.T, path string, tab *Table, fdes []readelfFDE) {
	byOff := map[string]FDERange{}
	for _, r := range tab.FDEs() {
		byOff[fmt.Sprintf("%s@%x", r.Section, r.Offset)] = r
	}
	var row Row
	nrows, bad := 0, 0
	for _, fd := range fdes {
		if fd.begin == fd.end {
			continue
		}
		if r, ok := byOff[fmt.Sprintf("%s@%x", fd.section, fd.off)]; !ok || r.Begin != fd.begin || r.End != fd.end {
			t.Errorf("%s FDE %x [%x,%x): not indexed (got %+v)", fd.section, fd.off, fd.begin, fd.end, r)
			bad++
			continue
		}
		if err := tab.Find(fd.begin, &row); err != nil {
			t.Errorf("FDE %x: Find(%x): %v", fd.off, fd.begin, err)
			bad++
			continue
		}
		for ri, want := range fd.rows {
			nrows++
			if err := tab.Find(want.loc, &row); err != nil {
				t.Errorf("FDE %x: Find(%x): %v", fd.off, want.loc, err)
				bad++
				continue
			}
			if row.FDE != fd.off {
				t.Errorf("Find(%x) used FDE %x, readelf %x", want.loc, row.FDE, fd.off)
			}
			mismatch := ""
			if got := readelfCell(row.CFA, true); got != want.cfa {
				mismatch += fmt.Sprintf(" cfa %s want %s;", got, want.cfa)
			}
			for reg, w := range want.cells {
				if reg >= NumRegs {
					continue
				}
				if got := readelfCell(row.Regs[reg], false); got != w {
					mismatch += fmt.Sprintf(" %s %s want %s;", x86RegName(reg), got, w)
				}
			}
			// The row must end where readelf's next row begins (or later,
			// when readelf printed a row with no change).
			if ri+1 < len(fd.rows) && row.End > fd.rows[ri+1].loc {
				mismatch += fmt.Sprintf(" row end %x past next row %x;", row.End, fd.rows[ri+1].loc)
			}
			if mismatch != "" {
				bad++
				if bad < 30 {
					t.Errorf("FDE %x pc %x:%s row %v", fd.off, want.loc, mismatch, &row)
				}
			}
		}
	}
	t.Logf("%s (hdr=%v): %d FDEs, %d rows compared with readelf, %d mismatches", path, tab.hdrN > 0, len(fdes), nrows, bad)
}

// systemFile returns path, skipping the test where this system has no such
// file (the fixtures do not include python3.11: the comparison does not
// depend on which copy it is, as both sides read the same one).
func systemFile(t *testing.T, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no %s on this system", path)
	}
	return path
}

func readelfFrames(t *testing.T, path string) io.Reader {
	t.Helper()
	if _, err := exec.LookPath("readelf"); err != nil {
		t.Skip("readelf not installed")
	}
	// readelf exits 1 after warnings it prints to stdout (libc has a few
	// about .debug_* sections); the frames are complete anyway.
	out, err := exec.Command("readelf", "--debug-dump=frames-interp", path).Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("readelf: %v", err)
	}
	return strings.NewReader(string(out))
}

func TestReadelfLibc(t *testing.T) {
	p := perftest.Testdata(t, "symfs", "usr", "lib", "x86_64-linux-gnu", "libc.so.6")
	crossCheck(t, p, readelfFrames(t, p))
}

func TestReadelfPython(t *testing.T) {
	if testing.Short() {
		t.Skip("large binary")
	}
	p := systemFile(t, "/usr/bin/python3.11")
	crossCheck(t, p, readelfFrames(t, p))
}
