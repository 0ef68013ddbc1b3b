package cfi

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"testing"
)

// fuzzEnv gives expressions deterministic registers and a small readable
// memory window.
type fuzzEnv struct{}

func (fuzzEnv) Reg(r uint16) (uint64, bool) {
	if r > 40 {
		return 0, false
	}
	return 0x7ff0_0000 + uint64(r)*8, true
}

func (fuzzEnv) ReadMem(addr uint64, size int) (uint64, bool) {
	if addr < 0x7ff0_0000 || addr > 0x7ff1_0000 {
		return 0, false
	}
	return addr ^ 0x5555, true
}

func addSeeds(f *testing.F) {
	e := &ehBuilder{addr: 0x3000}
	c := e.cie("zR", x86CIE...)
	e.fde(c, 0x1020, 0x40, 0x0e, 0x10, 0x46, 0x0e, 0x18, 0x4a,
		0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22)
	s := e.cie("zRS")
	e.fde(s, 0x104f, 0xa, 0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06, 0x10, 0x10, 0x03, 0x77, 0xa8, 0x01)
	f.Add(e.b, uint64(0x1030), false)
	f.Add(e.b, uint64(0x104f), true)
	if ef, err := elf.Open("testdata/frames"); err == nil {
		for _, name := range []string{".eh_frame", ".debug_frame"} {
			if sec := ef.Section(name); sec != nil {
				if d, err := sec.Data(); err == nil {
					f.Add(d, sec.Addr+0x10, name == ".debug_frame")
				}
			}
		}
		ef.Close()
	}
}

// FuzzCFI parses arbitrary bytes as .eh_frame or .debug_frame and looks up
// rows at arbitrary PCs: the property is "an error, or a row that formats
// and whose expressions evaluate (or fail) without panicking".
func FuzzCFI(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, pc uint64, debug bool) {
		s := Sections{EhFrame: data, EhFrameAddr: 0x3000}
		if debug {
			s = Sections{DebugFrame: [][]byte{data}}
		}
		// Also feed the bytes as a .eh_frame_hdr: its table must be
		// validated, not trusted.
		if !debug && len(data) > 12 {
			hdr := []byte{1, 0x1b, 0x03, 0x3b}
			hdr = binary.LittleEndian.AppendUint32(hdr, uint32(0x3000-0x2000-4))
			hdr = append(hdr, data[:12]...)
			s.EhFrameHdr, s.EhFrameHdrAddr = hdr, 0x2000
		}
		tab, err := New(s)
		if err != nil {
			return
		}
		var row Row
		pcs := []uint64{pc, pc + 1, 0x1030, 0x104f}
		for _, r := range tab.FDEs() {
			pcs = append(pcs, r.Begin, r.End-1, r.Begin+(pc%(r.End-r.Begin+1)))
			if len(pcs) > 64 {
				break
			}
		}
		for _, p := range pcs {
			if err := tab.Find(p, &row); err != nil {
				_ = err.Error()
				continue
			}
			if row.Start > p || p >= row.End {
				t.Fatalf("Find(%#x) returned row [%#x,%#x)", p, row.Start, row.End)
			}
			_ = row.String()
			env := fuzzEnv{}
			if row.CFA.Kind == RuleValExpression {
				Eval(row.Expr(row.CFA), env, nil)
			}
			for _, r := range row.Regs {
				if r.Kind == RuleExpression || r.Kind == RuleValExpression {
					Eval(row.Expr(r), env, []uint64{0x7ff0_1000})
				}
			}
		}
	})
}

// FuzzExpr evaluates arbitrary DWARF expressions.
func FuzzExpr(f *testing.F) {
	f.Add([]byte{0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}, uint64(0))
	f.Add([]byte{0x77, 0xa0, 0x01, 0x06}, uint64(1))
	f.Add([]byte{0x31, 0x28, 0x01, 0x00, 0x35, 0x37, 0x22}, uint64(0))
	f.Add([]byte{0x2f, 0xfd, 0xff}, uint64(0))
	f.Add([]byte{0x11, 0x70, 0x31, 0x26, 0x15, 0x00, 0x17, 0x94, 0x04}, uint64(3))
	f.Fuzz(func(t *testing.T, expr []byte, push uint64) {
		v, err := Eval(expr, fuzzEnv{}, []uint64{push})
		if err != nil {
			_ = err.Error()
			return
		}
		_ = v
	})
}

// FuzzLoadELF feeds arbitrary bytes to debug/elf and Load: hostile ELF
// files must give an error (debug/elf panics are recovered), never a crash.
func FuzzLoadELF(f *testing.F) {
	if d, err := os.ReadFile("testdata/frames"); err == nil {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		tab, err := Load(ef, ef)
		if err != nil {
			_ = err.Error()
			return
		}
		var row Row
		for _, r := range tab.FDEs() {
			tab.Find(r.Begin, &row)
		}
	})
}
