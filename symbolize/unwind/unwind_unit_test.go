package unwind

import (
	"encoding/binary"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/symbolize/internal/cfi"
)

func TestRegsFromPerf(t *testing.T) {
	// perf x86-64 order, mask 0xff0fff: AX BX CX DX SI DI BP SP IP FLAGS
	// CS SS, then R8..R15.
	vals := []uint64{0xa0, 0xb0, 0xc0, 0xd0, 0x51, 0xd1, 0xb9, 0x5b, 0x19, 0xf1, 0x33, 0x2b,
		8, 9, 10, 11, 12, 13, 14, 15}
	r := RegsFromPerf(ArchX86_64, 0xff0fff, vals)
	want := map[int]uint64{0: 0xa0, 3: 0xb0, 2: 0xc0, 1: 0xd0, 4: 0x51, 5: 0xd1, 6: 0xb9, 7: 0x5b, 16: 0x19,
		8: 8, 9: 9, 10: 10, 11: 11, 12: 12, 13: 13, 14: 14, 15: 15}
	for reg := 0; reg < cfi.NumRegs; reg++ {
		v, ok := r.get(reg)
		w, wok := want[reg]
		if ok != wok || v != w {
			t.Errorf("DWARF r%d = %#x,%v; want %#x,%v", reg, v, ok, w, wok)
		}
	}
	if pc, _ := r.PC(ArchX86_64); pc != 0x19 {
		t.Errorf("PC = %#x", pc)
	}
	// A partial mask: only IP and SP.
	r = RegsFromPerf(ArchX86_64, 1<<7|1<<8, []uint64{0x1000, 0x2000})
	if sp, _ := r.SP(ArchX86_64); sp != 0x1000 {
		t.Errorf("SP = %#x", sp)
	}
	if _, ok := r.get(6); ok {
		t.Error("rbp should be invalid")
	}
	if DefaultPerfMask(ArchX86_64) != 0xff0fff {
		t.Error("default mask")
	}
}

// fakeStack builds a stack copy of 8-byte words starting at base.
type fakeStack struct {
	base  uint64
	words []uint64
}

func (s *fakeStack) bytes() []byte {
	b := make([]byte, 8*len(s.words))
	for i, w := range s.words {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
	return b
}

// plainTable returns a table where every function in [lo,hi) has the x86-64
// CIE rule only (CFA = rsp+8, RA at CFA-8): a leaf without a frame.
func leafTable(t *testing.T, lo, hi uint64) *cfi.Table {
	return cfaTable(t, lo, hi, 8)
}

// cfaTable is leafTable with CFA = rsp+cfaOff.
func cfaTable(t *testing.T, lo, hi uint64, cfaOff byte) *cfi.Table {
	t.Helper()
	// Hand-assembled .debug_frame: CIE (DW_CFA_def_cfa r7+8,
	// DW_CFA_offset r16 at cfa-8) and one FDE for [lo,hi).
	var b []byte
	le := binary.LittleEndian
	b = le.AppendUint32(b, 20)
	b = le.AppendUint32(b, 0xffffffff)
	b = append(b, 1, 0, 1, 0x78, 16, 0x0c, 7, cfaOff, 0x90, 1, 0, 0, 0, 0, 0, 0)
	b = le.AppendUint32(b, 20)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, lo)
	b = le.AppendUint64(b, hi-lo)
	tab, err := cfi.New(cfi.Sections{DebugFrame: [][]byte{b}})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestUnwindFramePointerFallback(t *testing.T) {
	// Code at 0x400000–0x500000 has no CFI (nil table); the frames are
	// chained through rbp.
	maps := mappings{{Start: 0x400000, End: 0x500000}}
	st := &fakeStack{base: 0x7000, words: []uint64{
		0,                // 0x7000 (sp)
		0,                // 0x7008
		0x7030, 0x401234, // 0x7010: frame 1 rbp -> saved rbp, ra
		0, 0,
		0x7050, 0x402345, // 0x7030
		0, 0,
		0, 0x403456, // 0x7050: saved rbp 0 ends the chain after this frame
	}}
	var r Regs
	r.set(16, 0x400100)
	r.set(7, 0x7000)
	r.set(6, 0x7010)
	u := New(ArchX86_64)
	frames, stop := u.Unwind(r, st.base, st.bytes(), &maps, nil, nil)
	want := []uint64{0x400100, 0x401234, 0x402345, 0x403456}
	if len(frames) != len(want) {
		t.Fatalf("frames %+v stop %v", frames, stop)
	}
	for i, f := range frames {
		if f.PC != want[i] || (i > 0 && (f.Kind != FrameFP || !f.Return)) {
			t.Errorf("frame %d = %+v", i, f)
		}
	}
	if stop != StopNoCFI {
		t.Errorf("stop = %v, want no-cfi (rbp 0)", stop)
	}
}

func TestUnwindStops(t *testing.T) {
	tab := leafTable(t, 0x1000, 0x2000)
	maps := mappings{{Start: 0x401000, End: 0x402000, Bias: 0x400000, Table: tab}}
	u := New(ArchX86_64)
	base := uint64(0x7000)
	regs := func(pc, sp uint64) Regs {
		var r Regs
		r.set(16, pc)
		r.set(7, sp)
		return r
	}
	words := func(ws ...uint64) []byte { return (&fakeStack{base, ws}).bytes() }

	// The return address goes to an unknown mapping ([uprobes]).
	frames, stop := u.Unwind(regs(0x401100, base), base, words(0x7fff0000), &maps, nil, nil)
	if stop != StopUnknownMapping || len(frames) != 2 || frames[1].PC != 0x7fff0000 {
		t.Errorf("unknown mapping: %+v %v", frames, stop)
	}
	// A zero return address.
	frames, stop = u.Unwind(regs(0x401100, base), base, words(0), &maps, nil, nil)
	if stop != StopZeroPC || len(frames) != 1 {
		t.Errorf("zero pc: %+v %v", frames, stop)
	}
	// The stack copy ends before the return address.
	frames, stop = u.Unwind(regs(0x401100, base), base, nil, &maps, nil, nil)
	if stop != StopStackEnd || len(frames) != 1 {
		t.Errorf("stack end: %+v %v", frames, stop)
	}
	// ... and the kernel callchain completes it from the last known PC.
	cc := []uint64{0xfffffffffffffe00, 0x401100, 0x401555, 0x401666}
	frames, stop = u.Unwind(regs(0x401100, base), base, nil, &maps, cc, frames)
	if stop != StopStackEnd || len(frames) != 3 || frames[1].Kind != FrameCallchain || frames[2].PC != 0x401666 || !frames[2].Return {
		t.Errorf("callchain: %+v %v", frames, stop)
	}
	// Recursion that never ends: every frame returns to the same leaf.
	ws := make([]uint64, 1000)
	for i := range ws {
		ws[i] = 0x401200
	}
	u.MaxDepth = 50
	frames, stop = u.Unwind(regs(0x401100, base), base, words(ws...), &maps, nil, nil)
	if stop != StopDepth || len(frames) != 50 {
		t.Errorf("depth: %d frames, %v", len(frames), stop)
	}
	u.MaxDepth = 0
	// No registers.
	if _, stop := u.Unwind(Regs{}, base, nil, &maps, nil, nil); stop != StopNoRegs {
		t.Errorf("no regs: %v", stop)
	}
	// No resolver at all.
	frames, stop = u.Unwind(regs(0x401100, base), base, words(0x401200), nil, nil, nil)
	if stop != StopUnknownMapping || len(frames) != 1 {
		t.Errorf("nil resolver: %+v %v", frames, stop)
	}
}

func TestUnwindBadCFA(t *testing.T) {
	// CFA = rsp+0: the caller's SP would equal ours, a loop.
	maps := mappings{{Start: 0x1000, End: 0x2000, Table: cfaTable(t, 0x1000, 0x2000, 0)}}
	var r Regs
	r.set(16, 0x1100)
	r.set(7, 0x7000)
	frames, stop := New(ArchX86_64).Unwind(r, 0x7000, make([]byte, 64), &maps, nil, nil)
	if stop != StopBadCFA || len(frames) != 1 {
		t.Errorf("%+v %v, want bad-cfa", frames, stop)
	}
}

func TestLoadBias(t *testing.T) {
	f := perftest.OpenELF(t, "testdata/prog")
	// Non-PIE static: text segment at 0x401000, file offset 0x1000.
	if b, ok := LoadBias(f, 0x401000, 0x1000); !ok || b != 0 {
		t.Errorf("static bias = %#x, %v", b, ok)
	}
	if b, ok := LoadBias(f, 0x7f0000401000, 0x1000); !ok || b != 0x7f0000000000 {
		t.Errorf("shifted bias = %#x, %v", b, ok)
	}
}

type trampResolver struct {
	mappings
	tramp, sp, ret uint64
}

func (r *trampResolver) Lookup(pc uint64) (*cfi.Table, uint64, bool) { return r.mappings.Lookup(pc) }

func (r *trampResolver) ResolveTrampoline(pc, sp uint64) (uint64, bool) {
	if pc == r.tramp && sp == r.sp {
		return r.ret, true
	}
	return 0, false
}

func TestUnwindTrampoline(t *testing.T) {
	tab := leafTable(t, 0x1000, 0x2000)
	const base, tramp = 0x7000, 0x7ffff7fbf000
	res := &trampResolver{mappings: mappings{{Start: 0x401000, End: 0x402000, Bias: 0x400000, Table: tab}},
		tramp: tramp, sp: base + 8, ret: 0x401200}
	var r Regs
	r.set(16, 0x401100)
	r.set(7, base)
	// [base] holds the trampoline (the probed leaf's return address); the
	// real caller 0x401200 is a leaf too and returns to 0 (the root).
	stack := (&fakeStack{base, []uint64{tramp, 0}}).bytes()
	u := New(ArchX86_64)
	frames, stop := u.Unwind(r, base, stack, res, nil, nil)
	if stop != StopZeroPC || len(frames) != 2 || frames[1].PC != 0x401200 || frames[1].Kind != FrameTrampoline || !frames[1].Return {
		t.Errorf("%+v %v", frames, stop)
	}
	if n := testing.AllocsPerRun(100, func() { frames, _ = u.Unwind(r, base, stack, res, nil, frames) }); n != 0 {
		t.Errorf("%v allocs", n)
	}
}
