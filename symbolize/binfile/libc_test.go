package binfile

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/symbolize/internal/a2l"
)

// rootedFS lets a Locator see only the files under root, so a test cannot
// pick up this machine's own libc or debug files by accident.
type rootedFS struct{ root string }

func (r rootedFS) ok(name string) error {
	if name == r.root || strings.HasPrefix(name, r.root+"/") {
		return nil
	}
	return &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func (r rootedFS) Open(name string) (File, error) {
	if err := r.ok(name); err != nil {
		return nil, err
	}
	return os.Open(name)
}

func (r rootedFS) Stat(name string) (fs.FileInfo, error) {
	if err := r.ok(name); err != nil {
		return nil, err
	}
	return os.Stat(name)
}

const libcPath = "/usr/lib/x86_64-linux-gnu/libc.so.6"

// testSymfs returns the symfs holding libc and its debug file:
// testdata/symfs (written by testdata/gen.sh), or $FAULTLINE_TEST_SYMFS
// (e.g. "/" to test this machine's libc with libc6-dbg installed).
func testSymfs(t testing.TB) (Locator, string) {
	dir := os.Getenv("FAULTLINE_TEST_SYMFS")
	if dir == "" {
		dir = "../../testdata/symfs"
		if !fileExists(dir + libcPath) {
			t.Fatalf("committed fixture missing: %s%s (testdata/gen.sh writes it)", dir, libcPath)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if abs == "/" {
		return Locator{DebugDirs: []string{"/usr/lib/debug"}}, abs
	}
	return Locator{Symfs: abs, DebugDirs: []string{"/usr/lib/debug"}, FS: rootedFS{abs}}, abs
}

func openLibc(t testing.TB) *Binary {
	l, _ := testSymfs(t)
	b, err := l.Open(libcPath, "")
	if err != nil {
		t.Fatal(err)
	}
	if !b.HasDWARF() {
		b.Close()
		t.Skipf("libc's debug file is missing: %v", b.Warnings)
	}
	return b
}

func TestLibcAgreesWithAddr2line(t *testing.T) {
	b := openLibc(t)
	defer b.Close()
	t.Logf("libc %s, build ID %s, debug file %s", b.File, b.BuildID, b.DebugFile)
	// Live (addr2line installed): every 97th byte of .text. Golden: every
	// 997th, keyed by build ID so another libc is never compared with it.
	step := uint64(97)
	golden := fmt.Sprintf("testdata/libc-%s.addr2line", b.BuildID)
	if !*update && !hasAddr2line() {
		step = 997
	}
	if *update {
		step = 997
	}
	addrs := sampleText(t, b.ELF(), step)
	want := addr2lineExpect(t, b.DebugFile, golden, fmt.Sprintf("<every %dth byte of libc's .text>", step), addrs)
	a := compareWithAddr2line(b, want, addrs)
	t.Logf("agreement with addr2line: %v", a)
	for _, s := range a.badNames {
		t.Log("function name differs:", s)
	}
	for _, s := range a.bad {
		t.Log(s)
	}
	if a.names*100 < a.n*99 {
		t.Errorf("function names agree on fewer than 99%% of addresses: %v", a)
	}
}

// TestLibcAgreesWithLLVMSymbolizer checks file:line of every frame of the
// inline chains against a second independent tool, llvm-symbolizer
// (--output-style=GNU -a -f -i -C), because addr2line 2.40 misnames the
// file of some DWARF 5 line rows (see TestLibcAgreesWithAddr2line's log);
// llvm-symbolizer and readelf --debug-dump=decodedline agree with us there.
// Function names are not compared: llvm-symbolizer prefers symbol-table
// names such as "round_away.cold" for split functions.
func TestLibcAgreesWithLLVMSymbolizer(t *testing.T) {
	tool, err := exec.LookPath("llvm-symbolizer")
	if err != nil {
		t.Skip("llvm-symbolizer not installed")
	}
	b := openLibc(t)
	defer b.Close()
	addrs := sampleText(t, b.ELF(), 97)
	out, err := runSymbolizer(tool, []string{"--obj=" + b.DebugFile, "--output-style=GNU", "-a", "-f", "-i", "-C"}, addrs)
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseAddr2line(out)
	if err != nil {
		t.Fatal(err)
	}
	var n, same, padding int
	var bad []string
	var buf []Frame
	for _, addr := range addrs {
		exp := want[addr]
		if len(exp) == 0 {
			continue
		}
		buf = b.Symbolize(addr, buf[:0])
		if len(buf) == 1 && buf[0].Func == Unknown && b.syms.lookup(addr) == nil {
			padding++
			continue
		}
		n++
		ok := len(buf) == len(exp)
		for i := 0; ok && i < len(buf); i++ {
			ok = ourLoc(buf[i]) == a2l.NormLoc(exp[i].Loc)
		}
		if ok {
			same++
		} else if len(bad) < 10 {
			var g, e []string
			for _, f := range buf {
				g = append(g, ourLoc(f))
			}
			for _, f := range exp {
				e = append(e, a2l.NormLoc(f.Loc))
			}
			bad = append(bad, fmt.Sprintf("%#x: got %s want %s", addr, strings.Join(g, " <- "), strings.Join(e, " <- ")))
		}
	}
	t.Logf("llvm-symbolizer: %d addresses (+%d padding excluded): inline chain depth and every file:line equal on %.2f%%",
		n, padding, 100*float64(same)/float64(max(n, 1)))
	for _, s := range bad {
		t.Log(s)
	}
	if same*100 < n*99 {
		t.Errorf("file:line chains agree with llvm-symbolizer on fewer than 99%% of addresses")
	}
}

// TestTestdataVDSOAndKallsyms opens the vdso and the kallsyms subset that
// testdata/gen.sh copied from perf's build-id cache (~/.debug).
func TestTestdataVDSOAndKallsyms(t *testing.T) {
	const cacheDir = "../../testdata/buildid-cache"
	vdsos, _ := filepath.Glob(cacheDir + "/[[]vdso]/*/vdso")
	kall, _ := filepath.Glob(cacheDir + "/[[]kernel.kallsyms]/*/kallsyms")
	if len(vdsos) == 0 || len(kall) == 0 {
		t.Fatal("committed fixture missing: testdata/buildid-cache's vdso and kallsyms (testdata/gen.sh writes them)")
	}
	bid := filepath.Base(filepath.Dir(vdsos[0]))
	b, err := (&Locator{BuildIDDir: cacheDir}).Open("[vdso]", bid)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Warnings) != 0 || b.BuildID != bid {
		t.Errorf("vdso: build ID %s, warnings %q", b.BuildID, b.Warnings)
	}
	// readelf --dyn-syms on the vdso lists clock_gettime (with a
	// __vdso_ alias at the same address).
	found := false
	for _, s := range b.syms.syms {
		if fr := b.Symbolize(s.start, nil); strings.Contains(fr[0].Func, "clock_gettime") {
			found = true
		}
	}
	if !found {
		t.Errorf("no clock_gettime in the vdso's symbols")
	}
	f, err := os.Open(kall[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	k, err := ParseKallsyms(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.syms) == 0 {
		t.Fatal("no text symbols in kallsyms")
	}
	s := k.syms[len(k.syms)/2]
	if name, _, off, ok := k.Lookup(s.addr + 1); !ok || name != s.name || off != 1 {
		t.Errorf("Lookup(%#x) = %q+%#x %v, want %q+1", s.addr+1, name, off, ok, s.name)
	}
}
