package unwind

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/faultline/faultline/symbolize/internal/cfi"
)

// TestUnwindExpressionBudget: CFI that attaches a looping DWARF expression
// to every register of every frame (each evaluation runs to cfi's step cap)
// must not cost 256 frames × 15 registers × 10000 steps per sample: the
// unwind stops as bad-cfi once its expression budget is spent.
func TestUnwindExpressionBudget(t *testing.T) {
	le := binary.LittleEndian
	// CIE: CFA = rsp+8, RA at CFA-8, and for every other register
	// DW_CFA_val_expression { DW_OP_skip -3 }: a jump to itself.
	ins := []byte{0x0c, 7, 8, 0x90, 1}
	for r := byte(0); r < 16; r++ {
		if r == 7 {
			continue
		}
		ins = append(ins, 0x16, r, 3, 0x2f, 0xfd, 0xff)
	}
	body := append([]byte{1, 0, 1, 0x78, 16}, ins...)
	for (4+len(body))%8 != 4 {
		body = append(body, 0) // DW_CFA_nop
	}
	var b []byte
	b = le.AppendUint32(b, uint32(4+len(body)))
	b = le.AppendUint32(b, 0xffffffff)
	b = append(b, body...)
	b = le.AppendUint32(b, 20)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, 0x1000)
	b = le.AppendUint64(b, 0x1000)
	tab, err := cfi.New(cfi.Sections{DebugFrame: [][]byte{b}})
	if err != nil {
		t.Fatal(err)
	}
	maps := mappings{{Start: 0x401000, End: 0x402000, Bias: 0x400000, Table: tab}}
	base := uint64(0x7000)
	st := &fakeStack{base: base}
	for range 400 {
		st.words = append(st.words, 0x401100) // every frame returns into the same function
	}
	var regs Regs
	regs.set(16, 0x401100)
	regs.set(7, base)
	u := New(ArchX86_64)
	start := time.Now()
	frames, stop := u.Unwind(regs, base, st.bytes(), &maps, nil, nil)
	elapsed := time.Since(start)
	if stop != StopBadCFI {
		t.Errorf("stop = %v after %d frames, want bad-cfi (budget)", stop, len(frames))
	}
	if max := maxExprEvals/15 + 2; len(frames) > max {
		t.Errorf("%d frames, want at most %d before the budget runs out", len(frames), max)
	}
	t.Logf("%d frames, %v", len(frames), elapsed)
	// The budget is per unwind: the next sample starts afresh.
	frames2, _ := u.Unwind(regs, base, st.bytes(), &maps, nil, nil)
	if len(frames2) != len(frames) {
		t.Errorf("second unwind: %d frames, first %d", len(frames2), len(frames))
	}
}
