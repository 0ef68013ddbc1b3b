package correlate

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/report/reporttest"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize"
)

// ReadPerf against perf script's text of the same recordings (committed by
// testdata/gen.sh at the repository root).
func TestReadPerf(t *testing.T) {
	for _, name := range []string{"basic.tp", "basic.plain"} {
		t.Run(name, func(t *testing.T) {
			ref := perftest.ReadTestdata(t, "perf", name+".script.txt")
			type want struct {
				tid       uint32
				us        int64
				addr, ip  uint64
				code      uint64
				hasIP, tp bool
			}
			var wants []want
			sc := bufio.NewScanner(bytes.NewReader(ref))
			for sc.Scan() {
				line := sc.Text()
				if !strings.Contains(line, "page_fault_user:") && !strings.Contains(line, "page-faults:u:") {
					continue
				}
				f := strings.Fields(line)
				_, tid, _ := strings.Cut(f[1], "/")
				w := want{}
				n, _ := strconv.ParseUint(tid, 10, 32)
				w.tid = uint32(n)
				sec, frac, _ := strings.Cut(strings.TrimSuffix(f[2], ":"), ".")
				s, _ := strconv.ParseInt(sec, 10, 64)
				us, _ := strconv.ParseInt(frac, 10, 64)
				w.us = s*1e6 + us
				if strings.Contains(line, "page_fault_user:") {
					w.tp, w.hasIP = true, true
					for _, kv := range f[4:] {
						k, v, ok := strings.Cut(kv, "=")
						if !ok {
							continue
						}
						x, _ := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 64)
						switch k {
						case "address":
							w.addr = x
						case "ip":
							w.ip = x
						case "error_code":
							w.code = x
						}
					}
				} else {
					w.addr, _ = strconv.ParseUint(f[4], 16, 64)
				}
				wants = append(wants, w)
			}
			r, err := perfdata.Open(perftest.Testdata(t, "perf", name+".data"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			log, err := ReadPerf(r, FaultFilter{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(log.Faults) != len(wants) || len(wants) == 0 {
				t.Fatalf("%d faults, perf script shows %d", len(log.Faults), len(wants))
			}
			for i, w := range wants {
				f := log.Faults[i]
				got := want{tid: f.Tid, us: f.Time / 1000, addr: f.Addr, tp: w.tp}
				if w.tp {
					got.ip, got.code, got.hasIP = f.IP, f.Code, f.HasCode
				}
				if got != w {
					t.Fatalf("fault %d: %+v, perf script %+v", i, got, w)
				}
			}
		})
	}
}

// The profile names each accessing instruction from the binary
// (testdata/symfs) and the program's maps; the expected function is the
// ELF symbol (debug/elf, not faultline's binfile) that holds the address.
func TestProfileSymbolized(t *testing.T) {
	log := readFtraceFixture(t, "faults.trace")
	res, err := Run(log, bytesSource(fixture(t, "access.tt.log")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := symbolize.NewSession(symbolize.Config{Symfs: filepath.Join("testdata", "symfs"), Getenv: func(string) string { return "" }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	maps, err := symbolize.ParseProcMaps(bytes.NewReader(fixture(t, "access.tt.log.maps")))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		sess.Maps.Add(0, m)
	}
	p2 := reporttest.RoundTrip(t, Profile(res, &Symbolizer{Sess: sess, Pid: 0}))
	ef := perftest.OpenELF(t, filepath.Join("testdata", "symfs", "tmp", "fl_correlate_gen", "selftrace"))
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var text *elf.Prog
	for _, pr := range ef.Progs {
		if pr.Type == elf.PT_LOAD && pr.Flags&elf.PF_X != 0 {
			text = pr
		}
	}
	funcAt := func(vaddr uint64) string {
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value <= vaddr && vaddr < s.Value+s.Size {
				return s.Name
			}
		}
		return ""
	}
	total, named := int64(0), 0
	for _, s := range p2.Sample {
		total += s.Value[0]
		if s.Label["match"][0] != "ip" {
			continue
		}
		l := s.Location[0]
		if l.Mapping == nil || len(l.Line) == 0 {
			t.Fatalf("exact-match location %#x not symbolized", l.Address)
		}
		vaddr := l.Address - l.Mapping.Start + l.Mapping.Offset - text.Off + text.Vaddr
		if want := funcAt(vaddr); l.Line[len(l.Line)-1].Function.Name != want || want == "" {
			t.Errorf("%#x (vaddr %#x): %s, ELF symbol %q", l.Address, vaddr, l.Line[0].Function.Name, want)
		}
		named++
		if a := s.Label["access"]; len(a) != 1 || a[0] != "read" && a[0] != "write" {
			t.Errorf("access label %q", a)
		}
	}
	if total != int64(len(res.Pairs)) || named == 0 {
		t.Errorf("profile holds %d faults (%d exact locations), want %d", total, named, len(res.Pairs))
	}
	t.Log(fmt.Sprint(len(p2.Sample), " samples"))
}
