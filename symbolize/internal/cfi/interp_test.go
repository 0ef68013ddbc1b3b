package cfi

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// x86-64 CIE initial instructions, as gcc emits them:
//
//	DW_CFA_def_cfa: r7 (rsp) ofs 8
//	DW_CFA_offset: r16 (rip) at cfa-8
var x86CIE = []byte{0x0c, 0x07, 0x08, 0x90, 0x01}

type rowWant struct {
	pc         uint64
	start, end uint64
	str        string // Row.String() after the range
}

func checkRows(t *testing.T, tab *Table, wants []rowWant) {
	t.Helper()
	var row Row
	for _, w := range wants {
		if err := tab.Find(w.pc, &row); err != nil {
			t.Errorf("Find(%#x): %v", w.pc, err)
			continue
		}
		got := row.String()
		got = got[strings.Index(got, " ")+1:]
		if row.Start != w.start || row.End != w.end || got != w.str {
			t.Errorf("Find(%#x) = [%x,%x) %s\n                 want [%x,%x) %s", w.pc, row.Start, row.End, got, w.start, w.end, w.str)
		}
	}
}

// TestInterpRows runs hand-assembled FDEs (after gcc's x86-64 CIE, plus
// the case's own CIE instructions) and checks the rows Find returns, with
// the row ranges and rules readelf prints for the same bytes.
func TestInterpRows(t *testing.T) {
	for _, tc := range []struct {
		name        string
		addr        uint64 // .eh_frame's address
		cie         []byte // CIE instructions after x86CIE
		start, size uint64 // the FDE's range
		ins         []byte // the FDE's instructions
		rows        []rowWant
		noFDE       []uint64 // PCs outside every FDE
	}{{
		name: "prologue", addr: 0x2000, start: 0x1000, size: 0x40,
		ins: []byte{
			// readelf -wf:
			//   DW_CFA_advance_loc: 1 to 1001
			//   DW_CFA_def_cfa_offset: 16
			//   DW_CFA_offset: r6 (rbp) at cfa-16
			//   DW_CFA_advance_loc: 3 to 1004
			//   DW_CFA_def_cfa_register: r6 (rbp)
			//   DW_CFA_advance_loc1: 48 to 1034
			//   DW_CFA_def_cfa: r7 (rsp) ofs 8
			0x41, 0x0e, 0x10, 0x86, 0x02,
			0x43, 0x0d, 0x06,
			0x02, 0x30, 0x0c, 0x07, 0x08,
		},
		// readelf -wF:
		//   LOC              CFA      rbp   ra
		//   0000000000001000 rsp+8    u     c-8
		//   0000000000001001 rsp+16   c-16  c-8
		//   0000000000001004 rbp+16   c-16  c-8
		//   0000000000001034 rsp+8    c-16  c-8
		rows: []rowWant{
			{0x1000, 0x1000, 0x1001, "cfa=r7+8 r16=c-8"},
			{0x1001, 0x1001, 0x1004, "cfa=r7+16 r6=c-16 r16=c-8"},
			{0x1003, 0x1001, 0x1004, "cfa=r7+16 r6=c-16 r16=c-8"},
			{0x1010, 0x1004, 0x1034, "cfa=r6+16 r6=c-16 r16=c-8"},
			{0x103f, 0x1034, 0x1040, "cfa=r7+8 r6=c-16 r16=c-8"},
		},
		noFDE: []uint64{0xfff, 0x1040, 0},
	}, {
		name: "all opcodes", addr: 0x10000, start: 0x1000, size: 0x100000,
		cie: []byte{
			0x08, 0x03, // DW_CFA_same_value: r3 (rbx)
		},
		ins: []byte{
			// DW_CFA_offset_extended: r3 (rbx) at cfa-16
			0x05, 0x03, 0x02,
			// DW_CFA_offset_extended_sf: r12 at cfa-24
			0x11, 0x0c, 0x03,
			// DW_CFA_GNU_negative_offset_extended: r13 at cfa+8 (−1 × −8)
			0x2f, 0x0d, 0x01,
			// DW_CFA_undefined: r14
			0x07, 0x0e,
			// DW_CFA_register: r15 in r1 (rdx)
			0x09, 0x0f, 0x01,
			// DW_CFA_val_offset: r8 is cfa-16 (uleb 2 × −8)
			0x14, 0x08, 0x02,
			// DW_CFA_val_offset_sf: r9 is cfa+16 (sleb −2 × −8)
			0x15, 0x09, 0x7e,
			// DW_CFA_GNU_args_size: 16; DW_CFA_nop
			0x2e, 0x10, 0x00,
			// DW_CFA_advance_loc2: 0x100 to 1100
			0x03, 0x00, 0x01,
			// DW_CFA_restore_extended: r3 (rbx) -> same value (CIE)
			0x06, 0x03,
			// DW_CFA_restore: r12 -> unspecified
			0xcc,
			// DW_CFA_def_cfa_sf: r6 (rbp) ofs 16 (sleb −2 × −8)
			0x12, 0x06, 0x7e,
			// DW_CFA_advance_loc4: 0x10000 to 11100
			0x04, 0x00, 0x00, 0x01, 0x00,
			// DW_CFA_def_cfa_offset_sf: 32 (sleb −4 × −8)
			0x13, 0x7c,
			// DW_CFA_expression: r10 (DW_OP_breg7 (rsp): 8)
			0x10, 0x0a, 0x02, 0x77, 0x08,
			// DW_CFA_val_expression: r11 (DW_OP_breg6 (rbp): -8)
			0x16, 0x0b, 0x02, 0x76, 0x78,
			// DW_CFA_advance_loc: 1
			0x41,
			// DW_CFA_def_cfa_expression (DW_OP_breg7 (rsp): 160; DW_OP_deref)
			0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06,
		},
		rows: []rowWant{
			{0x1000, 0x1000, 0x1100, "cfa=r7+8 r3=c-16 r8=v-16 r9=v+16 r12=c-24 r13=c+8 r14=undef r15=r1 r16=c-8"},
			{0x1100, 0x1100, 0x11100, "cfa=r6+16 r3=s r8=v-16 r9=v+16 r13=c+8 r14=undef r15=r1 r16=c-8"},
			{0x11100, 0x11100, 0x11101, "cfa=r6+32 r3=s r8=v-16 r9=v+16 r10=exp7708 r11=vexp7678 r13=c+8 r14=undef r15=r1 r16=c-8"},
			{0x11101, 0x11101, 0x101000, "cfa=vexp77a00106 r3=s r8=v-16 r9=v+16 r10=exp7708 r11=vexp7678 r13=c+8 r14=undef r15=r1 r16=c-8"},
		},
	}, {
		name: "remember state", addr: 0x10000, start: 0x1000, size: 0x20,
		ins: []byte{
			// DW_CFA_advance_loc: 1; DW_CFA_def_cfa_offset: 16; DW_CFA_offset: r3 at cfa-16
			0x41, 0x0e, 0x10, 0x83, 0x02,
			// DW_CFA_advance_loc: 4; DW_CFA_remember_state
			0x44, 0x0a,
			// DW_CFA_def_cfa_offset: 8; DW_CFA_restore: r3
			0x0e, 0x08, 0xc3,
			// DW_CFA_advance_loc: 1; DW_CFA_restore_state
			0x41, 0x0b,
		},
		rows: []rowWant{
			{0x1003, 0x1001, 0x1005, "cfa=r7+16 r3=c-16 r16=c-8"},
			{0x1005, 0x1005, 0x1006, "cfa=r7+8 r16=c-8"},
			{0x1006, 0x1006, 0x1020, "cfa=r7+16 r3=c-16 r16=c-8"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := &ehBuilder{addr: tc.addr}
			c := e.cie("zR", append(slices.Clip(x86CIE), tc.cie...)...)
			e.fde(c, tc.start, tc.size, tc.ins...)
			tab := e.table(t)
			checkRows(t, tab, tc.rows)
			var row Row
			for _, pc := range tc.noFDE {
				if err := tab.Find(pc, &row); !errors.Is(err, ErrNoFDE) {
					t.Errorf("Find(%#x) = %v, want ErrNoFDE", pc, err)
				}
			}
		})
	}
}

// TestInterpPLT checks the .plt FDE gcc/ld emit, whose CFA depends on
// where in the 16-byte PLT entry the PC is:
//
//	DW_CFA_def_cfa_offset: 16
//	DW_CFA_advance_loc: 6 to 1026
//	DW_CFA_def_cfa_offset: 24
//	DW_CFA_advance_loc: 10 to 1030
//	DW_CFA_def_cfa_expression (DW_OP_breg7 (rsp): 8; DW_OP_breg16 (rip): 0;
//	    DW_OP_lit15; DW_OP_and; DW_OP_lit11; DW_OP_ge; DW_OP_lit3; DW_OP_shl;
//	    DW_OP_plus)
func TestInterpPLT(t *testing.T) {
	e := &ehBuilder{addr: 0x3000}
	c := e.cie("zR", x86CIE...)
	e.fde(c, 0x1020, 0x40,
		0x0e, 0x10, 0x46, 0x0e, 0x18, 0x4a,
		0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22)
	tab := e.table(t)
	var row Row
	for pc := uint64(0x1030); pc < 0x1060; pc++ {
		if err := tab.Find(pc, &row); err != nil {
			t.Fatal(err)
		}
		if row.CFA.Kind != RuleValExpression {
			t.Fatalf("pc %#x: CFA rule %v", pc, row.CFA.Kind)
		}
		const rsp = 0x7ffc0000
		env := &testEnv{regs: map[uint16]uint64{7: rsp, 16: pc + 0x555500000000}}
		cfa, err := Eval(row.Expr(row.CFA), env, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Before the "jmp *GOT" of an entry (offset < 11) the stack holds
		// only the return address; after the "push $n" it holds two words.
		want := uint64(rsp + 8)
		if pc&15 >= 11 {
			want = rsp + 16
		}
		if cfa != want {
			t.Errorf("pc %#x: CFA %#x, want %#x", pc, cfa, want)
		}
	}
	checkRows(t, tab, []rowWant{
		{0x1020, 0x1020, 0x1026, "cfa=r7+16 r16=c-8"},
		{0x1026, 0x1026, 0x1030, "cfa=r7+24 r16=c-8"},
	})
}

// TestInterpSignalFrame hand-assembles glibc's __restore_rt CFI (readelf -wf
// of libc.so.6: CIE "zRS"; the FDE starts one byte before __restore_rt so
// that a lookup at return address − 1 lands in it).
func TestInterpSignalFrame(t *testing.T) {
	e := &ehBuilder{addr: 0x3000}
	c := e.cie("zRS")
	e.fde(c, 0x104f, 0xa,
		// DW_CFA_def_cfa_expression (DW_OP_breg7 (rsp): 160; DW_OP_deref)
		0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06,
		// DW_CFA_expression: r8 (r8) (DW_OP_breg7 (rsp): 40)
		0x10, 0x08, 0x02, 0x77, 0x28,
		// DW_CFA_expression: r16 (rip) (DW_OP_breg7 (rsp): 168)
		0x10, 0x10, 0x03, 0x77, 0xa8, 0x01,
	)
	tab := e.table(t)
	var row Row
	if err := tab.Find(0x104f, &row); err != nil {
		t.Fatal(err)
	}
	if !row.Signal || row.RA != 16 {
		t.Errorf("row %v: want a signal frame with RA column 16", &row)
	}
	env := &testEnv{regs: map[uint16]uint64{7: 0x1000}, mem: map[uint64]uint64{0x1000 + 160: 0x2000}}
	cfa, err := Eval(row.Expr(row.CFA), env, nil)
	if err != nil || cfa != 0x2000 {
		t.Errorf("CFA = %#x, %v; want 0x2000", cfa, err)
	}
	addr, err := Eval(row.Expr(row.Regs[16]), env, []uint64{cfa})
	if err != nil || addr != 0x1000+168 {
		t.Errorf("rip saved at %#x, %v; want %#x", addr, err, 0x1000+168)
	}
}

func TestCIEVersionsAndFormats(t *testing.T) {
	for _, tc := range []struct {
		name    string
		debug   bool
		dwarf64 bool
		version byte
	}{
		{"eh v1", false, false, 1},
		{"eh v3", false, false, 3},
		{"eh 64-bit", false, true, 1},
		{"debug v1", true, false, 1},
		{"debug v3", true, false, 3},
		{"debug v4", true, false, 4},
		{"debug 64-bit v4", true, true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &ehBuilder{addr: 0x5000, debug: tc.debug, dwarf64: tc.dwarf64}
			aug := "zR"
			if tc.debug {
				aug = ""
			}
			// A second, unrelated CIE first, so CIE pointers are not 0.
			e.cieV(tc.version, aug, 4, -4, 30, 0x0c, 0x1f, 0x00)
			c := e.cieV(tc.version, aug, 4, -8, 16, x86CIE...)
			// DW_CFA_advance_loc: 2 (×4 = 8); DW_CFA_def_cfa_offset: 16
			e.fde(c, 0x1000, 0x20, 0x42, 0x0e, 0x10)
			e.b = append(e.b, 0, 0, 0, 0) // zero terminator
			tab := e.table(t)
			checkRows(t, tab, []rowWant{
				{0x1004, 0x1000, 0x1008, "cfa=r7+8 r16=c-8"},
				{0x1008, 0x1008, 0x1020, "cfa=r7+16 r16=c-8"},
			})
		})
	}
}

func TestInterpErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		ins  []byte
		msg  string
	}{
		{"restore_state underflow", []byte{0x0b}, "without remember_state"},
		{"unknown opcode", []byte{0x3f}, "unknown DW_CFA opcode"},
		{"truncated", []byte{0x0c, 0x07, 0x80, 0x80, 0x80, 0x80, 0x80}, "unexpected end"},
		{"expression too long", []byte{0x10, 0x03, 0x7f, 0x00}, "block longer"},
		{"def_cfa_offset without register rule", []byte{0x0f, 0x01, 0x30, 0x0e, 0x08}, "without a register CFA rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &ehBuilder{addr: 0x5000}
			c := e.cie("zR", x86CIE...)
			e.fde(c, 0x1000, 0x20, tc.ins...)
			tab := e.table(t)
			var row Row
			err := tab.Find(0x1000, &row)
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Find = %v, want FormatError containing %q", err, tc.msg)
			}
			if fe.Offset <= 0 || fe.Section != ".eh_frame" {
				t.Errorf("error lacks its position: %+v", fe)
			}
		})
	}
	// Remember-state nesting is capped.
	e := &ehBuilder{addr: 0x5000}
	c := e.cie("zR", x86CIE...)
	deep := make([]byte, 200)
	for i := range deep {
		deep[i] = 0x0a
	}
	e.fde(c, 0x1000, 0x20, deep...)
	var row Row
	if err := e.table(t).Find(0x1000, &row); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Errorf("deep remember_state: %v", err)
	}
}

// manyFDEs builds a table of n FDEs, 0x100 bytes each from 0x10000 on, each
// a small prologue and epilogue (def_cfa_offset 16 after 1 byte, 8 after 16).
func manyFDEs(t *testing.T, n uint64) *Table {
	e := &ehBuilder{addr: 0x3000}
	c := e.cie("zR", x86CIE...)
	for i := uint64(0); i < n; i++ {
		e.fde(c, 0x10000+i*0x100, 0x100, 0x41, 0x0e, 0x10, 0x4f, 0x0e, 0x08)
	}
	return e.table(t)
}

func TestFindAllocs(t *testing.T) {
	tab := manyFDEs(t, 100)
	var row Row
	i := uint64(0)
	// Misses and hits alike must not allocate.
	allocs := testing.AllocsPerRun(2000, func() {
		i = (i*7919 + 1) % 0x6400
		if err := tab.Find(0x10000+i, &row); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Find allocates %v times per call", allocs)
	}
}

// TestFindConcurrent runs Find from several goroutines (run with -race).
func TestFindConcurrent(t *testing.T) {
	tab := manyFDEs(t, 50)
	done := make(chan bool)
	for g := 0; g < 4; g++ {
		go func(g int) {
			var row Row
			for i := 0; i < 2000; i++ {
				pc := 0x10000 + uint64((i*131+g*7)%0x3200)
				if err := tab.Find(pc, &row); err != nil || row.Start > pc || pc >= row.End {
					t.Errorf("Find(%#x): %v %v", pc, err, &row)
				}
			}
			done <- true
		}(g)
	}
	for g := 0; g < 4; g++ {
		<-done
	}
}
