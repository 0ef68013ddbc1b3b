package unwind

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/faultline/faultline/symbolize/internal/cfi"
)

// procMaps is a per-process Resolver built from MMAP2 records, loading each
// file's CFI once.
type procMaps struct {
	maps mappings
	raw  []testMmap
}

func buildProcMaps(t *testing.T, mmaps []testMmap, pid uint32, tables map[string]*cfi.Table, files map[string]*elf.File) *procMaps {
	pm := &procMaps{}
	for _, m := range mmaps {
		if m.Pid != pid || m.Prot&4 == 0 || !strings.HasPrefix(m.Filename, "/") {
			continue
		}
		f, ok := files[m.Filename]
		if !ok {
			var err error
			f, err = elf.Open(m.Filename)
			if err != nil {
				t.Logf("%s: %v", m.Filename, err)
			}
			files[m.Filename] = f
			if f != nil {
				tab, err := cfi.Load(f, nil)
				if err != nil {
					t.Logf("%s: %v", m.Filename, err)
				}
				tables[m.Filename] = tab
			}
		}
		if f == nil {
			continue
		}
		bias, ok := LoadBias(f, m.Addr, m.Pgoff)
		if !ok {
			continue
		}
		pm.maps = append(pm.maps, mapping{Start: m.Addr, End: m.Addr + m.Len, Bias: bias, Table: tables[m.Filename]})
		pm.raw = append(pm.raw, m)
	}
	sort.Slice(pm.raw, func(i, j int) bool { return pm.raw[i].Addr < pm.raw[j].Addr })
	pm.maps.Sort()
	return pm
}

// inCode reports whether perf's frame lies in an executable mapping of its DSO.
func (pm *procMaps) inCode(f perfFrame) bool {
	for _, m := range pm.raw {
		if m.Filename == f.DSO && m.Pgoff <= f.Addr && f.Addr < m.Pgoff+m.Len {
			return true
		}
	}
	return false
}

// fileOffset converts a runtime address to perf script's map-relative form.
func (pm *procMaps) fileOffset(pc uint64) (uint64, bool) {
	for _, m := range pm.raw {
		if m.Addr <= pc && pc < m.Addr+m.Len {
			return pc - m.Addr + m.Pgoff, true
		}
	}
	return 0, false
}

// TestUnwindLivePerf records real programs with perf and checks that
// wherever perf script (perf's libdw unwinder) prints a stack, ours starts
// with the same frames; it reports how often each reaches the root.
func TestUnwindLivePerf(t *testing.T) {
	if testing.Short() {
		t.Skip("records with perf")
	}
	if _, err := exec.LookPath("perf"); err != nil {
		t.Skip("perf not installed")
	}
	for _, cmd := range [][]string{
		{"/bin/ls", "-l", "/"},
		{"/usr/bin/python3", "-c", "import json; json.dumps(list(range(100000)))"},
	} {
		t.Run(filepath.Base(cmd[0]), func(t *testing.T) {
			if _, err := os.Stat(cmd[0]); err != nil {
				t.Skip(err)
			}
			dir := t.TempDir()
			data := filepath.Join(dir, "perf.data")
			args := append([]string{"record", "-q", "-o", data, "--call-graph", "dwarf", "-e", "page-faults:u", "-c", "1", "--"}, cmd...)
			if out, err := exec.Command("perf", args...).CombinedOutput(); err != nil {
				t.Skipf("perf record failed (perf_event_paranoid?): %v\n%s", err, out)
			}
			script, err := exec.Command("perf", "script", "-i", data, "--ns", "--no-inline", "-F", "comm,pid,tid,time,event,ip,sym,dso").Output()
			if err != nil {
				t.Fatalf("perf script: %v", err)
			}
			sp := filepath.Join(dir, "script")
			if err := os.WriteFile(sp, script, 0o644); err != nil {
				t.Fatal(err)
			}
			perf := perfScriptStacks(t, sp)
			pd, err := readTestPerfData(data)
			if err != nil {
				t.Fatal(err)
			}
			tables, files := map[string]*cfi.Table{}, map[string]*elf.File{}
			defer func() {
				for _, f := range files {
					if f != nil {
						f.Close()
					}
				}
			}()
			procs := map[uint32]*procMaps{}
			u := New(ArchX86_64)
			var frames []Frame
			n, compared, mismatch, oursRoot, oursLonger, perfLonger, perfBad := 0, 0, 0, 0, 0, 0, 0
			stops := map[Stop]int{}
			for _, s := range pd.Samples {
				pm := procs[s.Pid]
				if pm == nil {
					pm = buildProcMaps(t, pd.Mmaps, s.Pid, tables, files)
					procs[s.Pid] = pm
				}
				p, ok := perf[timeKey(s.Tid, s.Time)]
				if !ok {
					t.Errorf("sample %s missing from perf script", timeKey(s.Tid, s.Time))
					continue
				}
				n++
				regs := RegsFromPerf(ArchX86_64, s.RegsMask, s.Regs)
				spv, _ := regs.SP(ArchX86_64)
				var stop Stop
				frames, stop = u.Unwind(regs, spv, s.Stack, &pm.maps, nil, frames)
				stops[stop]++
				var ours []uint64
				for _, fr := range frames {
					off, ok := pm.fileOffset(fr.lookupPC())
					if !ok {
						break
					}
					ours = append(ours, off)
				}
				if stop.Complete() {
					oursRoot++
				} else if os.Getenv("UNWIND_DEBUG") != "" {
					last := frames[len(frames)-1]
					off, _ := pm.fileOffset(last.PC)
					name := ""
					for _, m := range pm.raw {
						if m.Addr <= last.PC && last.PC < m.Addr+m.Len {
							name = m.Filename
						}
					}
					t.Logf("stop %v at %x (%s+%x) after %d frames; perf %d frames", stop, last.PC, name, off, len(frames), len(p))
					if len(p) > len(ours) && len(ours) > 0 {
						t.Logf("  ours tail %x; perf tail %v; stack %x..%x", ours[len(ours)-1], p[len(ours)-1:], spv, spv+uint64(len(s.Stack)))
					}
				}
				if len(ours) < len(frames) {
					// A frame in a mapping the test does not load ([vdso]):
					// the walk went through it (by frame pointers) but it
					// cannot be printed as perf does.
					continue
				}
				compared++
				k := len(p)
				if len(ours) < k {
					k = len(ours)
					perfLonger++
					if os.Getenv("UNWIND_DEBUG") != "" {
						t.Logf("shorter: ours %x (stop %v, %d frames) perf %v", ours, stop, len(frames), p)
					}
				} else if len(ours) > len(p) {
					oursLonger++
				}
				for i := 0; i < k; i++ {
					if p[i].Addr != ours[i] {
						if !pm.inCode(p[i]) {
							// perf's libdw went astray (seen: a frame in
							// libc's .data, "__quick_exit_funcs", after
							// the noreturn call in exit()).
							perfBad++
							break
						}
						mismatch++
						if mismatch <= 10 {
							var dsos []string
							for _, fr := range frames {
								for _, m := range pm.raw {
									if m.Addr <= fr.PC && fr.PC < m.Addr+m.Len {
										dsos = append(dsos, filepath.Base(m.Filename))
									}
								}
							}
							t.Errorf("sample %s frame %d: ours %x perf %x\n ours %x\n perf %x (stop %v)\n dsos %v", timeKey(s.Tid, s.Time), i, ours[i], p[i], ours, p, stop, dsos)
						}
						break
					}
				}
			}
			t.Logf("%d samples: %d compared, %d differ from perf, %d where perf's stack leaves code; ours complete %d, longer than perf %d, shorter %d; stops %v",
				n, compared, mismatch, perfBad, oursRoot, oursLonger, perfLonger, stops)
		})
	}
}
