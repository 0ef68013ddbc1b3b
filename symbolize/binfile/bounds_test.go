package binfile

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/faultline/faultline/perfdata/perftest"
)

const craftedDir = "../../testdata/crafted/"

func crafted(t *testing.T, name string) string {
	t.Helper()
	if _, err := os.Stat(craftedDir + name); err != nil {
		t.Fatalf("crafted input missing (regenerate with testdata/crafted/gen.sh): %v", err)
	}
	return craftedDir + name
}

// dwarfbomb.debug: eight .debug_* sections, all SHF_COMPRESSED and all
// pointing at one 204 KB zlib blob that claims (and inflates to) 200 MiB.
// Before the budget each section was inflated on its own (2.5 GB RSS, 15 s
// here); now the claim is refused before anything is inflated.
func TestDWARFBomb(t *testing.T) {
	path := crafted(t, "dwarfbomb.debug")
	if os.Getenv("FAULTLINE_CHILD") == "dwarfbomb" {
		b, err := (&Locator{}).Open(path, "")
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(3)
		}
		fmt.Printf("dwarf=%v\n%s\n", b.hasDWARF(), fmt.Sprint(b.Warnings))
		os.Exit(0)
	}
	out, rss, took := perftest.RunChild(t, "TestDWARFBomb", "dwarfbomb")
	t.Logf("%s(max RSS %d MiB, %v)", out, rss>>20, took)
	// 209715200 claimed from 203872 stored: 1028×, over maxInflateRatio.
	if !strings.HasPrefix(out, "dwarf=false") || !strings.Contains(out, "unusable DWARF") || !strings.Contains(out, "claims 209715200 bytes from 203872 compressed (1028×") {
		t.Errorf("no clear refusal:\n%s", out)
	}
	// Inflating the sections took 2.5 GB; refused, it takes a few MiB
	// beyond the runtime's own (more under -race).
	limit := int64(256 << 20)
	if raceBuild {
		limit = 1 << 30
	}
	if rss > limit || took > 60*time.Second {
		t.Errorf("max RSS %d MiB (limit %d), %v", rss>>20, limit>>20, took)
	}
}

// The same file with the blob's claim lowered to 50× its size passes the
// ratio check; that six sections share one blob is refused on its own.
func TestDWARFSharedBytes(t *testing.T) {
	data, err := os.ReadFile(crafted(t, "dwarfbomb.debug"))
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	s := ef.Section(".debug_info")
	binary.LittleEndian.PutUint64(data[s.Offset+8:], 50*s.FileSize) // Elf64_Chdr.ch_size
	b, err := (&Locator{FS: memFS{"/x": data}}).Open("/x", "")
	if err != nil {
		t.Fatal(err)
	}
	if w := fmt.Sprint(b.Warnings); b.hasDWARF() || !strings.Contains(w, "share bytes in the file") {
		t.Errorf("warnings: %s", w)
	}
}

// The per-binary and total budgets, on the fixtures' libc debug file,
// whose loaded sections (aranges, info, abbrev, line, str, line_str,
// rnglists; all zlib-compressed) take 8,573,363 bytes decompressed (the
// ZLIB sizes readelf -t prints:
// 0x18410+0x586f33+0xf00e4+0x13f93b+0x2ec6e+0xb16f+0x24674). The whole
// size is charged at open, though units are read as asked for.
func TestDWARFBudget(t *testing.T) {
	l, _ := testSymfs(t)
	const need = 0x18410 + 0x586f33 + 0xf00e4 + 0x13f93b + 0x2ec6e + 0xb16f + 0x24674
	open := func(budget *DWARFBudget) *Binary {
		l.DWARF = budget
		b, err := l.Open(libcPath, "")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if b := open(&DWARFBudget{PerBinary: need - 1}); b.hasDWARF() || !strings.Contains(fmt.Sprint(b.Warnings), "the most faultline loads for one binary") {
		t.Errorf("per-binary budget %d: DWARF %v, warnings %q", need-1, b.hasDWARF(), b.Warnings)
	}
	shared := &DWARFBudget{Total: need + need/2}
	first := open(shared)
	if !first.hasDWARF() || shared.used != need {
		t.Fatalf("first open: DWARF %v, %d bytes charged, want %d; warnings %q", first.hasDWARF(), shared.used, need, first.Warnings)
	}
	second := open(shared)
	if second.hasDWARF() || !strings.Contains(fmt.Sprint(second.Warnings), "past 12 MiB") {
		t.Errorf("second open within a total of %d: DWARF %v, warnings %q", need+need/2, second.hasDWARF(), second.Warnings)
	}
	second.Close()
	first.Close()
	if shared.used != 0 {
		t.Errorf("%d bytes still charged after Close", shared.used)
	}
	third := open(shared)
	defer third.Close()
	if !third.hasDWARF() {
		t.Errorf("after Close the budget is free again; warnings %q", third.Warnings)
	}
}

// sparseDebuglink copies testdata/crafted/debuglink/prog-VARIANT and its
// debug file into a temporary directory and extends the debug file,
// sparsely, to 200 GB (a .gnu_debuglink CRC covers the whole file).
func sparseDebuglink(t *testing.T, variant string) string {
	dir := t.TempDir()
	for _, name := range []string{"prog-" + variant, "prog-" + variant + ".debug"} {
		data, err := os.ReadFile(crafted(t, "debuglink/"+name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Truncate(dir+"/prog-"+variant+".debug", 200<<30); err != nil {
		t.Skipf("this file system cannot hold a 200 GB sparse file: %v", err)
	}
	return dir + "/prog-" + variant
}

// A 200 GB sparse debug file named by .gnu_debuglink: without build IDs
// it is refused by its size, unread; with matching build IDs it is taken
// without reading it. Before the bound the CRC read all 200 GB.
func TestDebuglinkSparse(t *testing.T) {
	for _, c := range []struct {
		variant   string
		wantDebug bool
	}{{"noid", false}, {"id", true}} {
		prog := sparseDebuglink(t, c.variant)
		start := time.Now()
		var names []string
		b, err := (&Locator{FS: loggingFS{osFS{}, &names}}).Open(prog, "")
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.DebugFile == prog+".debug"; got != c.wantDebug || b.hasDWARF() != c.wantDebug {
			t.Errorf("%s: debug file %q, DWARF %v; warnings %q", c.variant, b.DebugFile, b.hasDWARF(), b.Warnings)
		}
		if took > 5*time.Second {
			t.Errorf("%s: %v to open", c.variant, took)
		}
		b.Close()
	}
	// The refusal says why, where the search is reported.
	prog := sparseDebuglink(t, "noid")
	s := &search{l: &Locator{}, fsys: osFS{}}
	bin := s.first([]string{prog}, false, nil)
	defer s.closeRest()
	if f := s.findDebug(prog, "", bin); f != nil || !strings.Contains(strings.Join(s.rejected, "\n"), "200 GiB, too large to check its .gnu_debuglink CRC") {
		t.Errorf("found %v; rejected %q", f, s.rejected)
	}
}

// A recording's budget too small for a system library's separate debug
// file (64 KiB: libc's is 8.5 MB) leaves it unread, and charges nothing
// for a program's own separate debug file: the program's lines name its
// sites, whatever the recording's size.
func TestDWARFBudgetSparesTheProgram(t *testing.T) {
	l, _ := testSymfs(t)
	small := func() *DWARFBudget {
		return &DWARFBudget{Total: 64 << 10, Input: 1000}
	}
	l.DWARF = small()
	libc, err := l.Open(libcPath, "")
	if err != nil {
		t.Fatal(err)
	}
	defer libc.Close()
	if libc.hasDWARF() || !strings.Contains(fmt.Sprint(libc.Warnings), "1000-byte recording") {
		t.Errorf("libc: DWARF %v within a 1000-byte recording's budget; warnings %q", libc.hasDWARF(), libc.Warnings)
	}
	dir := t.TempDir()
	for _, name := range []string{"prog-id", "prog-id.debug"} {
		data, err := os.ReadFile(crafted(t, "debuglink/"+name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	budget := small()
	prog, err := (&Locator{DWARF: budget}).Open(dir+"/prog-id", "")
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	if prog.DebugFile != dir+"/prog-id.debug" || !prog.hasDWARF() || budget.used != 0 {
		t.Errorf("program: debug file %q, DWARF %v, %d bytes charged to the recording's budget; warnings %q", prog.DebugFile, prog.hasDWARF(), budget.used, prog.Warnings)
	}
}
