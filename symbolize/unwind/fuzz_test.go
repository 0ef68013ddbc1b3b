package unwind

import (
	"encoding/binary"
	"testing"
)

// FuzzUnwind walks arbitrary stack bytes from arbitrary registers over the
// fixture binary's CFI: the walk must end (within MaxDepth) without
// panicking or allocating beyond out.
func FuzzUnwind(f *testing.F) {
	maps, samples := loadFixture(f)
	for _, s := range samples[:4] {
		pc, _ := s.regs.PC(ArchX86_64)
		bp, _ := s.regs.get(6)
		stack := s.stack
		if len(stack) > 1024 {
			stack = stack[:1024] // small seeds keep minimization quick
		}
		f.Add(stack, pc, s.sp, bp)
	}
	u := New(ArchX86_64)
	out := make([]Frame, 0, DefaultMaxDepth)
	f.Fuzz(func(t *testing.T, stack []byte, pc, sp, bp uint64) {
		var r Regs
		r.set(16, pc)
		r.set(7, sp)
		r.set(6, bp)
		if len(stack) >= 8 {
			r.set(3, binary.LittleEndian.Uint64(stack))
		}
		frames, stop := u.Unwind(r, sp, stack, maps, []uint64{pc, pc + 1}, out)
		if len(frames) > DefaultMaxDepth || len(frames) == 0 {
			t.Fatalf("%d frames (stop %v)", len(frames), stop)
		}
		_ = stop.String()
	})
}
