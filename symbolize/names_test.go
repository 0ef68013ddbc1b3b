package symbolize_test

// Names of sampled PCs against GNU addr2line (binutils): every PC of every
// frame of every sample of the fixture recordings (testdata/perf/*.data),
// unwound by our own session, callers at return address - 1 (the call
// instruction, as addr2line and pprof want them), is named by
//
//	addr2line -a -f -i -C -e FILE VADDR...
//
// where FILE is the binary's debug file when it has one (libc, ld.so),
// else the binary (fixtures, the vdso). The answers are in the golden file
// testdata/sampled.addr2line (written with -update, which records the exact
// command per file), so the test runs without binutils.

import (
	"bufio"
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/binfile"
)

var updateNames = flag.Bool("update", false, "rewrite testdata/sampled.addr2line with addr2line")

const sampledGolden = "testdata/sampled.addr2line"

// sampledPC is one sampled location: the file addr2line reads (relative to
// the repository root, so the golden file does not depend on the checkout)
// and the ELF virtual address of the instruction.
type sampledPC struct {
	file  string
	vaddr uint64
}

// chainFrame is one frame of an inline chain, innermost first.
type chainFrame struct{ fn, loc string }

// collectSampledPCs unwinds every sample of the fixture recordings and
// returns our inline chain for each distinct PC, and how many frames of all
// samples were at it.
func collectSampledPCs(t *testing.T) (map[sampledPC][]chainFrame, map[sampledPC]int) {
	t.Helper()
	pattern := "../testdata/perf/*.data"
	if testing.Short() && !*updateNames {
		// The allocs variants alone hold 265 of the 267 PCs.
		pattern = "../testdata/perf/*.allocs.data"
	}
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		t.Skip("no fixtures in testdata/perf (run testdata/gen.sh)")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[sampledPC][]chainFrame{}
	weight := map[sampledPC]int{}
	for _, path := range files {
		r, err := perfdata.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		sess, err := symbolize.NewSession(symbolize.Config{Symfs: "../testdata/symfs", BuildIDDir: "../testdata/buildid-cache", Getenv: func(string) string { return "" }}, r.Meta())
		if err != nil {
			t.Fatal(err)
		}
		seen := map[symbolize.LocID]*sampledPC{}
		for r.Next() {
			switch rec := r.Record().(type) {
			case *perfdata.Sample:
				id, _ := sess.Unwind(rec, false)
				for _, lid := range sess.Stack(id) {
					if key, ok := seen[lid]; ok {
						if key != nil {
							weight[*key]++
						}
						continue
					}
					seen[lid] = nil
					l := sess.Loc(lid)
					b := sess.Binary(l.Map)
					if l.Kernel || b == nil {
						continue
					}
					pc := l.PC
					if l.Return {
						pc--
					}
					vaddr, ok := b.MappedVaddr(pc, l.Map.Start, l.Map.Pgoff)
					if !ok {
						continue
					}
					file := b.File
					if b.DebugFile != "" {
						file = b.DebugFile
					}
					if abs, err := filepath.Abs(file); err == nil {
						if rel, err := filepath.Rel(root, abs); err == nil && !strings.HasPrefix(rel, "..") {
							file = rel
						}
					}
					var chain []chainFrame
					for _, f := range sess.Lines(lid, false) {
						chain = append(chain, chainFrame{ourName(f), ourFileLine(f)})
					}
					key := sampledPC{file, vaddr}
					out[key] = chain
					weight[key]++
					seen[lid] = &key
				}
			default:
				sess.Observe(rec)
			}
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		sess.Close()
		r.Close()
	}
	return out, weight
}

func ourName(f binfile.Frame) string {
	if f.Func == binfile.Unknown {
		return "??"
	}
	return f.Func
}

func ourFileLine(f binfile.Frame) string {
	file, line := f.File, "?"
	if file == "" {
		file = "??"
	}
	if f.Line != 0 {
		line = strconv.Itoa(f.Line)
	}
	return file + ":" + line
}

// a2lLoc normalizes addr2line's file:line the way binfile's addr2line tests
// do: no discriminator, "??:0" as "??:?", a cleaned path without binutils
// 2.40's doubled DWARF 5 directory ("./csu/./csu/x.c").
func a2lLoc(loc string) string {
	if i := strings.Index(loc, " (discriminator "); i >= 0 {
		loc = loc[:i]
	}
	if loc == "??:0" {
		return "??:?"
	}
	if i := strings.LastIndexByte(loc, ':'); i > 0 && loc[:i] != "??" {
		p := filepath.Clean(loc[:i])
		if j := strings.IndexByte(p, '/'); j > 0 && strings.HasPrefix(p[j+1:], p[:j+1]) {
			p = p[j+1:]
		}
		loc = p + loc[i:]
	}
	return loc
}

// readSampledGolden parses the golden file: "# file: F" starts a block of
// addr2line -a -f -i output for F.
func readSampledGolden(data []byte) (map[sampledPC][]chainFrame, error) {
	res := map[sampledPC][]chainFrame{}
	var file, fn string
	var cur sampledPC
	haveFn := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# file: "); ok {
			file = f
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "0x") && !haveFn {
			a, err := strconv.ParseUint(line[2:], 16, 64)
			if err != nil {
				return nil, err
			}
			cur = sampledPC{file, a}
			res[cur] = nil
			continue
		}
		if !haveFn {
			fn, haveFn = line, true
			continue
		}
		res[cur] = append(res[cur], chainFrame{fn, line})
		haveFn = false
	}
	return res, sc.Err()
}

// writeSampledGolden runs addr2line per file and writes the golden file.
func writeSampledGolden(t *testing.T, pcs map[sampledPC][]chainFrame) []byte {
	t.Helper()
	byFile := map[string][]uint64{}
	for pc := range pcs {
		byFile[pc.file] = append(byFile[pc.file], pc.vaddr)
	}
	var names []string
	for f := range byFile {
		names = append(names, f)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	ver, _ := exec.Command("addr2line", "--version").Output()
	v, _, _ := strings.Cut(string(ver), "\n")
	fmt.Fprintf(&buf, "# generated by: go test ./symbolize -run TestSampledNamesMatchAddr2line -update\n")
	fmt.Fprintf(&buf, "# tool: %s\n", v)
	fmt.Fprintf(&buf, "# every distinct PC of every sample's user stack in testdata/perf/*.data as\n")
	fmt.Fprintf(&buf, "# faultline's session unwinds it (callers at return address - 1), as the ELF\n")
	fmt.Fprintf(&buf, "# virtual address in FILE (the debug file where there is one), paths relative\n")
	fmt.Fprintf(&buf, "# to the repository root; per file, run from there:\n")
	for _, f := range names {
		addrs := byFile[f]
		sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
		args := []string{"-a", "-f", "-i", "-C", "-e", f}
		for _, a := range addrs {
			args = append(args, fmt.Sprintf("%#x", a))
		}
		cmd := exec.Command("addr2line", args...)
		cmd.Dir = ".."
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("addr2line -e %s: %v: %s", f, err, stderr.Bytes())
		}
		fmt.Fprintf(&buf, "# file: %s\n# command: addr2line -a -f -i -C -e %s <the %d addresses below>\n", f, f, len(addrs))
		buf.Write(out)
	}
	if err := os.WriteFile(sampledGolden, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSampledNamesMatchAddr2line: the outermost function name of ≥ 99% of
// the sampled PCs equals addr2line -f's, and every inline chain's names equal
// addr2line -i's. File:line is reported, not required: binutils 2.40 names
// the wrong file for some DWARF 5 line rows (see binfile's
// TestLibcAgreesWithLLVMSymbolizer).
func TestSampledNamesMatchAddr2line(t *testing.T) {
	ours, weight := collectSampledPCs(t)
	var data []byte
	if *updateNames {
		if _, err := exec.LookPath("addr2line"); err != nil {
			t.Fatal("-update needs addr2line (binutils)")
		}
		data = writeSampledGolden(t, ours)
	} else {
		var err error
		if data, err = os.ReadFile(sampledGolden); err != nil {
			t.Skipf("no golden file (go test -run %s -update writes it): %v", t.Name(), err)
		}
	}
	want, err := readSampledGolden(data)
	if err != nil {
		t.Fatal(err)
	}
	type tally struct{ n, names, aliases, chains, chainsLoc, inlined, inlinedSame, frames, framesNamed int }
	perFile := map[string]*tally{}
	var all tally
	var bad, locBad []string
	syms := map[string]map[string][]uint64{} // file -> symbol name -> values
	for pc, chain := range ours {
		exp, ok := want[pc]
		if !ok || len(exp) == 0 {
			t.Errorf("%s %#x: not in %s (regenerate with -update)", pc.file, pc.vaddr, sampledGolden)
			continue
		}
		tl := perFile[pc.file]
		if tl == nil {
			tl = &tally{}
			perFile[pc.file] = tl
		}
		got, wantName := chain[len(chain)-1].fn, exp[len(exp)-1].fn
		nameOK := got == wantName
		// Where several symbols share an address (strspn, an IFUNC, and
		// strspn_ifunc, its resolver), addr2line and perf pick different
		// ones; we pick perf's. The ELF symbol table says whether the two
		// names are such aliases.
		aliasOK := nameOK || len(chain) == 1 && len(exp) == 1 && sameAddress(t, syms, pc.file, got, wantName)
		chainOK := len(chain) == len(exp)
		locOK := chainOK
		for i := 0; chainOK && i < len(chain); i++ {
			chainOK = chain[i].fn == exp[i].fn
			locOK = locOK && chainOK && chain[i].loc == a2lLoc(exp[i].loc)
		}
		for _, x := range []*tally{tl, &all} {
			x.n++
			x.frames += weight[pc]
			if nameOK {
				x.names++
				x.framesNamed += weight[pc]
			}
			if aliasOK {
				x.aliases++
			}
			if chainOK {
				x.chains++
			}
			if locOK {
				x.chainsLoc++
			}
			if len(exp) > 1 {
				x.inlined++
				if chainOK {
					x.inlinedSame++
				}
			}
		}
		if chainOK && !locOK {
			var g, e []string
			for _, f := range chain {
				g = append(g, f.loc)
			}
			for _, f := range exp {
				e = append(e, a2lLoc(f.loc))
			}
			locBad = append(locBad, fmt.Sprintf("%s %#x %s: ours %s; addr2line %s", pc.file, pc.vaddr, chain[0].fn, strings.Join(g, " <- "), strings.Join(e, " <- ")))
		}
		if !chainOK {
			var g, e []string
			for _, f := range chain {
				g = append(g, f.fn)
			}
			for _, f := range exp {
				e = append(e, f.fn)
			}
			note := ""
			if aliasOK {
				note = " (aliases: same address in the symbol table)"
			}
			bad = append(bad, fmt.Sprintf("%s %#x (%d frames): ours %s; addr2line %s%s", pc.file, pc.vaddr, weight[pc], strings.Join(g, " <- "), strings.Join(e, " <- "), note))
		}
	}
	sort.Strings(bad)
	for _, s := range bad {
		t.Log("differs:", s)
	}
	sort.Strings(locBad)
	for _, s := range locBad {
		t.Log("file:line differs:", s)
	}
	pct := func(k, n int) float64 { return 100 * float64(k) / float64(max(n, 1)) }
	var files []string
	for f := range perFile {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		x := perFile[f]
		t.Logf("%s: %d PCs, outermost name %.2f%% (aliases allowed %.2f%%), inline chain names %.2f%% (%d of %d chains with inlined frames), chain names+file:line %.2f%%",
			f, x.n, pct(x.names, x.n), pct(x.aliases, x.n), pct(x.chains, x.n), x.inlinedSame, x.inlined, pct(x.chainsLoc, x.n))
	}
	t.Logf("all: %d distinct sampled PCs (%d frames of samples): outermost function name equal %.2f%% of PCs (%.2f%% of frames), equal or a symbol alias %.2f%%; inline chain names %.2f%% (%d of %d with inlined frames); chain names+file:line %.2f%%",
		all.n, all.frames, pct(all.names, all.n), pct(all.framesNamed, all.frames), pct(all.aliases, all.n), pct(all.chains, all.n), all.inlinedSame, all.inlined, pct(all.chainsLoc, all.n))
	if all.aliases*100 < all.n*99 {
		t.Errorf("outermost function names agree (up to aliases) on %d of %d sampled PCs (< 99%%)", all.aliases, all.n)
	}
	if all.inlinedSame != all.inlined {
		t.Errorf("inline chains (names) differ from addr2line -i on %d of %d sampled PCs with inlined frames", all.inlined-all.inlinedSame, all.inlined)
	}
}

// sameAddress reports whether file's symbol tables (.symtab and .dynsym)
// hold symbols named a and b with the same value.
func sameAddress(t *testing.T, cache map[string]map[string][]uint64, file, a, b string) bool {
	m, ok := cache[file]
	if !ok {
		m = map[string][]uint64{}
		cache[file] = m
		f, err := elf.Open(filepath.Join("..", file))
		if err != nil {
			t.Logf("%s: %v", file, err)
			return false
		}
		defer f.Close()
		for _, get := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
			ss, _ := get() // a missing table is no alias
			for _, s := range ss {
				if s.Value != 0 {
					m[s.Name] = append(m[s.Name], s.Value)
				}
			}
		}
	}
	for _, va := range m[a] {
		for _, vb := range m[b] {
			if va == vb {
				return true
			}
		}
	}
	return false
}
