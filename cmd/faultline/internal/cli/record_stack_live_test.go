package cli

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
)

// scriptStack is one sampled allocation's stack as faultline script
// prints it: its thread, its size and its frames, innermost first.
type scriptStack struct {
	main   bool // the main thread (tid = pid)
	size   uint64
	funcs  []string
	inLibc bool   // the outermost frame is in the C library
	last   uint64 // the outermost frame's address, file-relative
	lastIn string // and its binary
}

var scriptStackHeader = regexp.MustCompile(`^\s*(\S+)\s+(\d+)/(\d+)\s.* [^ ]+:[a-z_]+/stack-[^:]*: .* size=(\d+) `)

// scriptStacks reads the stack samples of comm's allocator calls from
// faultline script's output.
func scriptStacks(t *testing.T, out []byte, comm string) []scriptStack {
	t.Helper()
	var all []scriptStack
	var cur *scriptStack
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := scriptStackHeader.FindStringSubmatch(line); m != nil && m[1] == comm {
			size, _ := strconv.ParseUint(m[4], 10, 64)
			all = append(all, scriptStack{main: m[2] == m[3], size: size})
			cur = &all[len(all)-1]
			continue
		}
		if cur == nil || !strings.HasPrefix(line, "\t") {
			cur = nil
			continue
		}
		// "\t  ADDR FUNC (DSO)"
		f := strings.Fields(line)
		if len(f) >= 3 {
			cur.funcs = append(cur.funcs, f[1])
			cur.lastIn = strings.Trim(f[len(f)-1], "()")
			cur.inLibc = strings.Contains(cur.lastIn, "/libc.so")
			cur.last, _ = strconv.ParseUint(f[0], 16, 64)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return all
}

// recordAndScript records prog with the defaults and method, and returns
// the recording's path and faultline script's output.
func recordAndScript(t *testing.T, method, prog string, args ...string) (string, []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(prog)+".data")
	if code, stderr := runRecordMain(append([]string{"-q", "--method", method, "-o", out, "--", prog}, args...)...); code != ExitOK {
		t.Fatalf("record exited %d: %s", code, stderr)
	}
	var script bytes.Buffer
	if code := Main([]string{"script", out}, &Env{Stdout: &script, Stderr: io.Discard}); code != 0 {
		t.Fatalf("script exited %d", code)
	}
	return out, script.Bytes()
}

// complete reports whether s is what deep's structure says its stack is:
// malloc, then as many frames of descend as the size says (64 + 8·d bytes
// at depth d; the bottom's big block adds 65536), then worker, then main
// and the C library's start-up up to _start in the main thread, or
// start_thread and clone3 in the other.
func deepComplete(s scriptStack) bool {
	d := int((s.size%65536 - 64) / 8)
	f := s.funcs
	if len(f) < 1+d+2 || f[0] != "malloc" {
		return false
	}
	for _, fn := range f[1 : 1+d] {
		if fn != "descend" {
			return false
		}
	}
	rest := f[1+d:]
	if rest[0] != "worker" {
		return false
	}
	if s.main {
		return len(rest) >= 3 && rest[1] == "main" && rest[len(rest)-1] == "_start"
	}
	return len(rest) == 3 && rest[1] == "start_thread" && rest[2] == "clone3"
}

// TestRecordLiveDeepStacks records testdata/record/src/deep.c (allocations
// at every level of a 200-frame recursion, 112 bytes a frame, in the main
// thread and another) with the defaults and checks that at least 99% of
// the sampled stacks are whole: each, as faultline script unwinds it, has
// exactly the frames of descend its allocation's size says and ends at
// the thread's root frame, and analyze counts at least 99% of the stacks
// as having reached the root. In-process, the second thread's copies also
// end exactly at its thread pointer (checkCopyEnd).
func TestRecordLiveDeepStacks(t *testing.T) {
	progs := requireInproc(t)
	for _, method := range []string{"inproc", "uprobe"} {
		t.Run(method, func(t *testing.T) {
			tpFile := filepath.Join(t.TempDir(), "tp")
			out, script := recordAndScript(t, method, filepath.Join(progs, "deep"), "200", "100", tpFile)
			stacks := scriptStacks(t, script, "deep")
			if method == "inproc" {
				checkCopyEnd(t, out, tpFile)
			}
			var whole, mainThread int
			for _, s := range stacks {
				if deepComplete(s) {
					whole++
				}
				if s.main {
					mainThread++
				}
			}
			// Each thread: 100 × 201 mallocs, 100 of them big (all with
			// stacks) and 1 in 61 of the rest: about 430.
			if mainThread < 300 || len(stacks)-mainThread < 300 {
				t.Fatalf("%d stacks of the main thread and %d of the other; want about 430 each", mainThread, len(stacks)-mainThread)
			}
			if whole*100 < 99*len(stacks) {
				t.Errorf("%d of %d sampled stacks whole; want at least 99%%", whole, len(stacks))
			}
			res, err := analyzeFile(&Env{Stderr: io.Discard}, out, defaultAnalyzeOptions(), symbolize.Config{}, true)
			if err != nil {
				t.Fatal(err)
			}
			u := res.Summary.Unwind
			t.Logf("%d of %d sampled stacks whole (%d of the main thread); analyze: %d of %d reached the root", whole, len(stacks), mainThread, u.Complete, u.Samples)
			if u.Samples < uint64(len(stacks)) || u.Complete*100 < 99*u.Samples {
				t.Errorf("analyze: %d of %d stacks reached the root (stopped early: %v); want at least 99%%", u.Complete, u.Samples, u.ByStop)
			}
		})
	}
}

// checkCopyEnd checks where the shim's copies of deep's second thread's
// stack end: at the thread pointer deep wrote to tpFile (its pthread_t),
// below which the C library starts the thread's stack, not at the end of
// the stack's mapping above the thread's control block and TLS.
func checkCopyEnd(t *testing.T, path, tpFile string) {
	t.Helper()
	b, err := os.ReadFile(tpFile)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := perfdata.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var n, at int
	for rd.Next() {
		smp, ok := rd.Record().(*perfdata.Sample)
		if !ok || smp.Pid == smp.Tid || len(smp.Stack) == 0 || smp.RegsMask&(1<<7) == 0 {
			continue
		}
		// x86-64 sample_regs_user: SP is bit 7; Regs holds the set
		// bits' values in bit order.
		sp := smp.Regs[bits.OnesCount64(smp.RegsMask&(1<<7-1))]
		n++
		if sp+uint64(len(smp.Stack)) == tp {
			at++
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 || at != n {
		t.Errorf("%d of %d stack copies of the second thread end at its thread pointer %#x", at, n, tp)
	}
}

// TestRecordInprocLiveOtherStacks records testdata/record/src/otherstacks.c
// in-process: allocations on a coroutine's stack and on a signal
// handler's alternate stack, outside the thread's own stack, whose copies
// the shim reads up to its cap as far as the memory goes. Every
// allocation is big enough to take a stack, and its size says where it
// was made (the program's comment): a coroutine's at depth d has exactly
// d frames of climb and then the coroutine's start in the C library; a
// handler's has on_signal and the signal frame (__restore_rt) above
// malloc. A recorder that copied nothing there would give malloc alone.
func TestRecordInprocLiveOtherStacks(t *testing.T) {
	progs := requireInproc(t)
	const depth, signals = 20, 20
	_, script := recordAndScript(t, "inproc", filepath.Join(progs, "otherstacks"), strconv.Itoa(depth), strconv.Itoa(signals))
	var coro, handler int
	for _, s := range scriptStacks(t, script, "otherstacks") {
		switch {
		case s.size >= 8192+8 && s.size <= 8192+8*depth:
			d := int(s.size-8192) / 8
			ok := len(s.funcs) == d+2 && s.funcs[0] == "malloc" && s.inLibc
			for _, fn := range s.funcs[1:min(len(s.funcs), d+1)] {
				ok = ok && fn == "climb"
			}
			if !ok {
				t.Errorf("coroutine, depth %d: stack %v; want malloc, %d × climb, the coroutine's start in libc", d, s.funcs, d)
			}
			coro++
		case s.size >= 16384+8 && s.size <= 16384+8*signals:
			if len(s.funcs) < 3 || s.funcs[0] != "malloc" || s.funcs[1] != "on_signal" || s.funcs[2] != "__restore_rt" {
				t.Errorf("signal handler: stack %v; want malloc, on_signal, __restore_rt", s.funcs)
			}
			handler++
		}
	}
	if coro != depth || handler != signals {
		t.Errorf("%d coroutine stacks and %d handler stacks; want %d and %d", coro, handler, depth, signals)
	}
}

// TestRecordInprocLiveSqliteStacks records the sqlite3 shell running 5000
// INSERTs with the defaults and checks that at least 99% of the sampled
// stacks reach the program's entry: their outermost frame is in sqlite3,
// within _start (its ELF entry point, read with debug/elf, and the 64
// bytes after it, where _start calls __libc_start_main). Before the copy
// went to the top of the stack by default, 0.8% of them did.
func TestRecordInprocLiveSqliteStacks(t *testing.T) {
	requireLiveRecord(t)
	bin, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("no sqlite3 shell (apt-get install sqlite3)")
	}
	bin, err = filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	// faultline script prints file offsets: the entry point's is its
	// address less its segment's address plus the segment's offset.
	entry := f.Entry
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && f.Entry >= p.Vaddr && f.Entry < p.Vaddr+p.Filesz {
			entry = f.Entry - p.Vaddr + p.Off
		}
	}
	f.Close()
	dir := t.TempDir()
	var sql strings.Builder
	sql.WriteString("PRAGMA synchronous=OFF; PRAGMA journal_mode=MEMORY;\nCREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, b BLOB);\nCREATE INDEX ti ON t(name);\n")
	for i := range 5000 {
		fmt.Fprintf(&sql, "INSERT INTO t(name, v, b) VALUES('name-%d-%s', %d.5, randomblob(%d));\n", i, strings.Repeat("x", i%50), i, 16+i%200)
	}
	script := filepath.Join(dir, "inserts.sql")
	if err := os.WriteFile(script, []byte(sql.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out := recordAndScript(t, "inproc", bin, filepath.Join(dir, "db.sqlite"), ".read "+script)
	stacks := scriptStacks(t, out, "sqlite3")
	var atEntry int
	for _, s := range stacks {
		if s.main && s.lastIn == bin && s.last >= entry && s.last < entry+64 {
			atEntry++
		}
	}
	t.Logf("%d of %d sampled stacks end in sqlite3's _start", atEntry, len(stacks))
	if len(stacks) < 1000 || atEntry*100 < 99*len(stacks) {
		t.Errorf("%d of %d sampled stacks end in sqlite3's _start (entry %#x); want at least 99%% of 1000 or more", atEntry, len(stacks), entry)
	}
}
