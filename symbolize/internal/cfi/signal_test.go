package cfi

import (
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

// sigcontextOffsets is where glibc's __restore_rt CFI says each register
// lives relative to the trampoline's rsp (rt_sigframe's ucontext;
// readelf -wf libc.so.6 prints them as DW_CFA_expression: rN (DW_OP_breg7
// (rsp): off)). They follow from the kernel's struct sigcontext layout.
var sigcontextOffsets = map[int]uint64{
	8: 40, 9: 48, 10: 56, 11: 64, 12: 72, 13: 80, 14: 88, 15: 96,
	5: 104, 4: 112, 6: 120, 3: 128, 1: 136, 0: 144, 2: 152, 7: 160, 16: 168,
}

func checkRestoreRT(t *testing.T, path string) {
	tab := loadTable(t, path)
	var row Row
	found := 0
	for _, r := range tab.FDEs() {
		if err := tab.Find(r.Begin, &row); err != nil {
			t.Fatalf("Find(%#x): %v", r.Begin, err)
		}
		if !row.Signal {
			continue
		}
		found++
		const rsp = 0x7ffd0000
		env := &testEnv{regs: map[uint16]uint64{7: rsp}, mem: map[uint64]uint64{rsp + 160: 0x7ffe1230}}
		cfa, err := Eval(row.Expr(row.CFA), env, nil)
		if err != nil || cfa != 0x7ffe1230 {
			t.Errorf("%s: signal frame CFA = %#x, %v; want the saved rsp", path, cfa, err)
		}
		for reg, off := range sigcontextOffsets {
			rule := row.Regs[reg]
			if rule.Kind != RuleExpression {
				t.Errorf("r%d: rule %v, want expression", reg, rule.Kind)
				continue
			}
			addr, err := Eval(row.Expr(rule), env, []uint64{cfa})
			if err != nil || addr != rsp+off {
				t.Errorf("r%d saved at %#x, %v; want rsp+%d", reg, addr, err, off)
			}
		}
	}
	if found != 1 {
		t.Errorf("%s: %d signal frames, want 1 (__restore_rt)", path, found)
	}
}

func TestRestoreRTStatic(t *testing.T) { checkRestoreRT(t, "../../unwind/testdata/prog") }

func TestRestoreRTLibc(t *testing.T) {
	checkRestoreRT(t, perftest.Testdata(t, "symfs", "usr", "lib", "x86_64-linux-gnu", "libc.so.6"))
}
