package unwind

import (
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize/internal/cfi"
)

// The shared fixtures (testdata/README.md): perf recordings of the fixture
// programs with every mapped ELF under testdata/symfs and perf script's
// stacks (perf 6.1, libdw) in *.noinline.script.txt. They are independent
// of this machine's libc.
const testdataDir = "../../testdata"

type scriptSample struct {
	header string
	tid    uint32
	frames []perfFrame // user frames only
}

// readScript reads `perf script -F comm,pid,tid,time,event,addr,ip,sym,dso,trace --no-inline`
// and keeps each sample's user frames.
func readScript(t *testing.T, path string) []scriptSample {
	var out []scriptSample
	for _, s := range perftest.ReadScript(t, path) {
		ss := scriptSample{header: s.Header, tid: s.Tid}
		for _, f := range s.Frames {
			if f.Addr != ^uint64(0) && f.DSO != "[kernel.kallsyms]" {
				ss.frames = append(ss.frames, perfFrame{f.Addr, f.DSO})
			}
		}
		out = append(out, ss)
	}
	return out
}

// testPerfData is what the unwinder tests need of a recording: its MMAP2
// records and samples, copied out of perfdata's reused records.
type testPerfData struct {
	Samples []testSample
	Mmaps   []testMmap
}

type testSample struct {
	Pid, Tid  uint32
	Time      uint64
	IP        uint64
	Callchain []uint64
	RegsMask  uint64
	Regs      []uint64
	Stack     []byte
}

type testMmap struct {
	Pid              uint32
	Addr, Len, Pgoff uint64
	Prot             uint32
	Filename         string
}

func readTestPerfData(path string) (*testPerfData, error) {
	r, err := perfdata.Open(path, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var pd testPerfData
	for r.Next() {
		switch rec := r.Record().(type) {
		case *perfdata.Mmap:
			if rec.Type == perfdata.RecordMmap2 {
				pd.Mmaps = append(pd.Mmaps, testMmap{rec.Pid, rec.Addr, rec.Len, rec.Pgoff, rec.Prot, rec.Filename})
			}
		case *perfdata.Sample:
			pd.Samples = append(pd.Samples, testSample{rec.Pid, rec.Tid, rec.Time, rec.IP,
				slices.Clone(rec.Callchain), rec.RegsMask, slices.Clone(rec.Regs), slices.Clone(rec.Stack)})
		}
	}
	return &pd, r.Err()
}

// symfsBinaries opens ELF files from testdata/symfs (and the vdso from the
// build-id cache) once each, with their CFI and separate debug files.
type symfsBinaries struct {
	t      *testing.T
	files  map[string]*elf.File
	tables map[string]*cfi.Table
}

func (b *symfsBinaries) open(name string) (*elf.File, *cfi.Table) {
	if f, ok := b.files[name]; ok {
		return f, b.tables[name]
	}
	var path string
	switch {
	case name == "[vdso]":
		m, _ := filepath.Glob(filepath.Join(testdataDir, "buildid-cache", "[[]vdso]", "*", "vdso"))
		if len(m) > 0 {
			path = m[0]
		}
	case strings.HasPrefix(name, "/"):
		path = filepath.Join(testdataDir, "symfs", name)
	}
	var f *elf.File
	var tab *cfi.Table
	if path != "" {
		var err error
		if f, err = elf.Open(path); err == nil {
			var dbg *elf.File
			if id := buildID(f); id != "" {
				dbg, _ = elf.Open(filepath.Join(testdataDir, "symfs/usr/lib/debug/.build-id", id[:2], id[2:]+".debug"))
			}
			if tab, err = cfi.Load(f, dbg); err != nil {
				b.t.Logf("%s: %v", name, err)
			}
			if dbg != nil {
				dbg.Close() // Load copied what it needs
			}
		}
	}
	b.files[name], b.tables[name] = f, tab
	return f, tab
}

func buildID(f *elf.File) string {
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		return ""
	}
	d, err := s.Data()
	if err != nil || len(d) < 16 {
		return ""
	}
	namesz := binary.LittleEndian.Uint32(d)
	descsz := binary.LittleEndian.Uint32(d[4:])
	off := 12 + (namesz+3)&^3
	if uint64(off)+uint64(descsz) > uint64(len(d)) {
		return ""
	}
	return hex.EncodeToString(d[off : off+descsz])
}

type tdMap struct {
	mapping
	name  string
	pgoff uint64
}

// tdProc is a process's executable mappings, a Resolver.
type tdProc struct {
	maps []tdMap
	res  mappings
}

func (p *tdProc) add(m tdMap) {
	var keep []tdMap
	for _, o := range p.maps {
		if o.End <= m.Start || o.Start >= m.End {
			keep = append(keep, o)
		}
	}
	p.maps = append(keep, m)
	sort.Slice(p.maps, func(i, j int) bool { return p.maps[i].Start < p.maps[j].Start })
	p.res = p.res[:0]
	for _, x := range p.maps {
		p.res = append(p.res, x.mapping)
	}
}

func (p *tdProc) find(pc uint64) *tdMap {
	for i := range p.maps {
		if p.maps[i].Start <= pc && pc < p.maps[i].End {
			return &p.maps[i]
		}
	}
	return nil
}

// TestUnwindTestdata unwinds every sample of the shared fixture recordings
// and compares with perf script wherever perf printed a stack.
func TestUnwindTestdata(t *testing.T) {
	files := append(perftest.Glob(t, "perf/*.plain.data"), perftest.Glob(t, "perf/*.tp.data")...)
	perftest.Testdata(t, "symfs", "usr")
	for _, data := range files {
		t.Run(filepath.Base(data), func(t *testing.T) {
			unwindTestdata(t, data, false)
		})
		t.Run(filepath.Base(data)+"/trampolines", func(t *testing.T) {
			unwindTestdata(t, data, true)
		})
	}
}

func unwindTestdata(t *testing.T, data string, withTrampolines bool) {
	script := readScript(t, strings.TrimSuffix(data, ".data")+".noinline.script.txt")
	r, err := perfdata.Open(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bins := &symfsBinaries{t: t, files: map[string]*elf.File{}, tables: map[string]*cfi.Table{}}
	defer func() {
		for _, f := range bins.files {
			if f != nil {
				f.Close()
			}
		}
	}()
	procs := map[uint32]*tdProc{}
	proc := func(pid uint32) *tdProc {
		if procs[pid] == nil {
			procs[pid] = &tdProc{}
		}
		return procs[pid]
	}
	u := New(ArchX86_64)
	var frames []Frame
	saved := map[[2]uint64]uint64{}
	n, complete := 0, 0
	var tl tdTally
	stops := map[string]int{}
	byEvent := map[string][2]int{}
	for r.Next() {
		switch rec := r.Record().(type) {
		case *perfdata.Mmap:
			if !rec.Executable() {
				continue
			}
			f, tab := bins.open(rec.Filename)
			if f == nil {
				continue
			}
			bias, ok := LoadBias(f, rec.Addr, rec.Pgoff)
			if !ok {
				continue
			}
			proc(rec.Pid).add(tdMap{mapping{Start: rec.Addr, End: rec.Addr + rec.Len, Bias: bias, Table: tab}, rec.Filename, rec.Pgoff})
		case *perfdata.Comm:
			if rec.Exec {
				procs[rec.Pid] = &tdProc{}
			}
		case *perfdata.Fork:
			if rec.Pid != rec.Ppid {
				child := &tdProc{}
				for _, m := range proc(rec.Ppid).maps {
					child.add(m)
				}
				procs[rec.Pid] = child
			}
		case *perfdata.Sample:
			if n >= len(script) {
				t.Fatalf("more samples than perf script printed")
			}
			ss := script[n]
			n++
			if ss.tid != rec.Tid {
				t.Fatalf("sample %d: tid %d, perf script %q", n, rec.Tid, ss.header)
			}
			p := proc(rec.Pid)
			var user []uint64
			for i, pc := range rec.Callchain {
				if pc == perfdata.ContextUser {
					user = rec.Callchain[i+1:]
				}
			}
			regs := RegsFromPerf(ArchX86_64, rec.RegsMask, rec.Regs)
			sp, _ := regs.SP(ArchX86_64)
			ev := rec.Event.Name
			if ev == "probe_libc:malloc" && len(rec.Stack) >= 8 {
				saved[[2]uint64{uint64(rec.Tid), sp + 8}] = binary.LittleEndian.Uint64(rec.Stack)
			}
			var stop Stop
			var res Resolver = &p.res
			if withTrampolines {
				res = &tdResolver{p, rec.Tid, saved}
			}
			frames, stop = u.Unwind(regs, sp, rec.Stack, res, user, frames)
			stops[stop.String()]++
			c := byEvent[ev]
			c[0]++
			if stop.Complete() {
				complete++
				c[1]++
			}
			byEvent[ev] = c
			tl.compare(t, ss, p, frames, stop)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(script) {
		t.Errorf("%d samples, perf script printed %d", n, len(script))
	}
	var evs []string
	for ev, c := range byEvent {
		evs = append(evs, fmt.Sprintf("%s %d/%d", ev, c[1], c[0]))
	}
	sort.Strings(evs)
	t.Logf("%d samples, %d differ from perf, %d where perf leaves code; complete %d (%s); longer than perf %d, shorter %d; %d through a uretprobe trampoline; stops %v",
		n, tl.mismatch, tl.perfBad, complete, strings.Join(evs, ", "), tl.longer, tl.shorter, tl.tramp, stops)
}

// tdTally counts how the unwound stacks compare with perf's.
type tdTally struct {
	mismatch, perfBad, longer, shorter, tramp int
}

// compare compares the frames unwound for one sample with those perf
// script printed for it (ss), and counts the outcome.
func (tl *tdTally) compare(t *testing.T, ss scriptSample, p *tdProc, frames []Frame, stop Stop) {
	var ours []perfFrame
	trampolines := 0
	for _, fr := range frames {
		if fr.Kind == FrameTrampoline {
			trampolines++
		}
		m := p.find(fr.PC)
		if m == nil {
			break
		}
		ours = append(ours, perfFrame{fr.lookupPC() - m.Start + m.pgoff, m.name})
	}
	if trampolines > 0 {
		tl.tramp++
		if !stop.Complete() {
			t.Errorf("%s: fixed trampoline but the walk ended with %v", ss.header, stop)
		}
	}
	pf := ss.frames
	if os.Getenv("UNWIND_DEBUG") != "" && !stop.Complete() {
		t.Logf("%s: stop %v\n ours %v\n perf %v", ss.header, stop, ours, pf)
	}
	k := len(pf)
	switch {
	case len(ours) < k:
		k = len(ours)
		tl.shorter++
	case len(ours) > k:
		tl.longer++
	}
	for i := 0; i < k; i++ {
		if pf[i] == ours[i] {
			continue
		}
		if m := p.findFile(pf[i]); m == nil {
			tl.perfBad++ // perf's libdw left the code (seen after noreturn calls)
			break
		}
		tl.mismatch++
		if tl.mismatch <= 10 {
			t.Errorf("%s\n frame %d: ours %v, perf %v\n ours %v\n perf %v (stop %v)", ss.header, i, ours[i], pf[i], ours, pf, stop)
		}
		break
	}
}

// tdResolver adds TrampolineResolver to a process's mappings: the return
// addresses saved from malloc entry samples, keyed by thread and the
// probed call's CFA (entry SP + 8).
type tdResolver struct {
	p     *tdProc
	tid   uint32
	saved map[[2]uint64]uint64
}

func (r *tdResolver) Lookup(pc uint64) (*cfi.Table, uint64, bool) { return r.p.res.Lookup(pc) }

func (r *tdResolver) ResolveTrampoline(pc, sp uint64) (uint64, bool) {
	ret, ok := r.saved[[2]uint64{uint64(r.tid), sp}]
	return ret, ok
}

// findFile reports the mapping holding perf's frame (DSO-relative), if any.
func (p *tdProc) findFile(f perfFrame) *tdMap {
	for i := range p.maps {
		m := &p.maps[i]
		if m.name == f.DSO && m.pgoff <= f.Addr && f.Addr < m.pgoff+(m.End-m.Start) {
			return m
		}
	}
	return nil
}

// BenchmarkUnwindTestdata unwinds the page-fault and malloc samples of the
// shared basic.plain recording (PIE + libc.so.6 + ld.so, 2–12 frames)
// round-robin.
func BenchmarkUnwindTestdata(b *testing.B) {
	data := perftest.Testdata(b, "perf", "basic.plain.data")
	perftest.Testdata(b, "symfs", "usr")
	r, err := perfdata.Open(data, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	t := &testing.T{}
	bins := &symfsBinaries{t: t, files: map[string]*elf.File{}, tables: map[string]*cfi.Table{}}
	type smp struct {
		regs  Regs
		sp    uint64
		stack []byte
		proc  *tdProc
	}
	var samples []smp
	procs := map[uint32]*tdProc{}
	for r.Next() {
		switch rec := r.Record().(type) {
		case *perfdata.Mmap:
			f, tab := bins.open(rec.Filename)
			if f == nil || rec.Prot&4 == 0 {
				continue
			}
			if bias, ok := LoadBias(f, rec.Addr, rec.Pgoff); ok {
				if procs[rec.Pid] == nil {
					procs[rec.Pid] = &tdProc{}
				}
				procs[rec.Pid].add(tdMap{mapping{Start: rec.Addr, End: rec.Addr + rec.Len, Bias: bias, Table: tab}, rec.Filename, rec.Pgoff})
			}
		case *perfdata.Comm:
			if rec.Exec {
				procs[rec.Pid] = &tdProc{}
			}
		case *perfdata.Sample:
			p := procs[rec.Pid]
			if p == nil {
				continue
			}
			regs := RegsFromPerf(ArchX86_64, rec.RegsMask, rec.Regs)
			sp, _ := regs.SP(ArchX86_64)
			samples = append(samples, smp{regs, sp, append([]byte(nil), rec.Stack...), p})
		}
	}
	if len(samples) == 0 {
		b.Fatal("no samples in basic.plain.data")
	}
	u := New(ArchX86_64)
	benchUnwind(b, len(samples), func(i int, frames []Frame) []Frame {
		s := &samples[i]
		frames, _ = u.Unwind(s.regs, s.sp, s.stack, &s.proc.res, nil, frames)
		return frames
	})
}
