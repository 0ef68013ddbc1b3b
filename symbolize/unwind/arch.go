package unwind

import (
	"fmt"

	"github.com/faultline/faultline/symbolize/internal/cfi"
)

// Arch selects the register layout of samples and CFI.
type Arch uint8

const (
	// ArchUnknown is the zero Arch; an Unwinder for it stops with StopNoRegs.
	ArchUnknown Arch = iota
	// ArchX86_64 is x86-64 (perf's sample_regs_user layout from
	// arch/x86/include/uapi/asm/perf_regs.h; DWARF numbering from the
	// System V AMD64 psABI, figure 3.36).
	ArchX86_64
	// ArchARM64 is AArch64 (arch/arm64/include/uapi/asm/perf_regs.h:
	// x0–x30, sp, pc; DWARF: x0–x30 = 0–30, sp = 31). The mapping is in
	// place; the unwinder has only been tested on x86-64.
	ArchARM64
)

// ArchFromMachine maps a machine name as uname(2) gives it, and as perf
// stores it in its ARCH header feature ("x86_64", "aarch64"), to an Arch;
// ArchUnknown for any other.
func ArchFromMachine(machine string) Arch {
	switch machine {
	case "x86_64":
		return ArchX86_64
	case "aarch64", "arm64":
		return ArchARM64
	}
	return ArchUnknown
}

func (a Arch) String() string {
	switch a {
	case ArchX86_64:
		return "x86_64"
	case ArchARM64:
		return "arm64"
	}
	return fmt.Sprintf("Arch(%d)", a)
}

// archInfo is what the unwinder needs to know about an architecture.
type archInfo struct {
	// perfToDWARF maps a sample_regs_user bit number to a DWARF register
	// (-1: not a DWARF register the unwinder uses).
	perfToDWARF [64]int8
	pc          int // register holding the PC in Regs (x86-64: the RA column 16)
	sp          int
	fp          int
	ra          int // the link register (AArch64 x30); -1 on x86-64
	nregs       int // registers 0..nregs-1 are tracked
	// strictCFA: the CFA is always above SP (x86-64, where a call pushes
	// the return address); an AArch64 leaf may have CFA == SP.
	strictCFA bool
	// defaultMask is perf's default sample_regs_user for
	// --call-graph dwarf (PERF_REGS_MASK).
	defaultMask uint64
}

var arches = [...]archInfo{
	ArchX86_64: x86_64Info(),
	ArchARM64:  arm64Info(),
}

func x86_64Info() archInfo {
	a := archInfo{pc: 16, sp: 7, fp: 6, ra: -1, nregs: 17, strictCFA: true, defaultMask: 0xff0fff}
	for i := range a.perfToDWARF {
		a.perfToDWARF[i] = -1
	}
	// perf: AX BX CX DX SI DI BP SP IP FLAGS CS SS DS ES FS GS (bits 0–15),
	// R8–R15 (bits 16–23). DWARF: rax 0, rdx 1, rcx 2, rbx 3, rsi 4, rdi 5,
	// rbp 6, rsp 7, r8–r15 8–15, return address (rip) 16.
	for bit, dw := range map[int]int8{0: 0, 1: 3, 2: 2, 3: 1, 4: 4, 5: 5, 6: 6, 7: 7, 8: 16} {
		a.perfToDWARF[bit] = dw
	}
	for i := 0; i < 8; i++ {
		a.perfToDWARF[16+i] = int8(8 + i)
	}
	return a
}

func arm64Info() archInfo {
	a := archInfo{pc: 32, sp: 31, fp: 29, ra: 30, nregs: 33, defaultMask: 1<<33 - 1}
	for i := range a.perfToDWARF {
		a.perfToDWARF[i] = -1
	}
	for i := 0; i <= 32; i++ { // x0–x30, sp (31), pc (32)
		a.perfToDWARF[i] = int8(i)
	}
	return a
}

func (a Arch) info() *archInfo {
	if int(a) < len(arches) && a != ArchUnknown {
		return &arches[a]
	}
	return nil
}

// DefaultPerfMask returns perf's default sample_regs_user mask for
// --call-graph dwarf on arch (0xff0fff on x86-64).
func DefaultPerfMask(arch Arch) uint64 {
	if a := arch.info(); a != nil {
		return a.defaultMask
	}
	return 0
}

// Regs is a frame's register file in DWARF numbering. Valid has bit r set
// when Val[r] is known. On x86-64, Val[16] (the return-address column) holds
// the frame's PC.
type Regs struct {
	Val   [cfi.NumRegs]uint64
	Valid uint64
}

// Get returns DWARF register r.
func (r *Regs) get(reg int) (uint64, bool) {
	if reg < 0 || reg >= cfi.NumRegs || r.Valid&(1<<uint(reg)) == 0 {
		return 0, false
	}
	return r.Val[reg], true
}

// Set sets DWARF register r (ignored when r is not tracked).
func (r *Regs) set(reg int, v uint64) {
	if reg < 0 || reg >= cfi.NumRegs {
		return
	}
	r.Val[reg] = v
	r.Valid |= 1 << uint(reg)
}

// PC returns the frame's PC.
func (r *Regs) PC(arch Arch) (uint64, bool) {
	if a := arch.info(); a != nil {
		return r.get(a.pc)
	}
	return 0, false
}

// SP returns the frame's stack pointer.
func (r *Regs) SP(arch Arch) (uint64, bool) {
	if a := arch.info(); a != nil {
		return r.get(a.sp)
	}
	return 0, false
}

// RegsFromPerf converts a sample's user registers (perf's
// PERF_SAMPLE_REGS_USER: vals holds one value per set bit of mask, lowest
// bit first) into DWARF numbering. Registers missing from mask or vals are
// left invalid.
func RegsFromPerf(arch Arch, mask uint64, vals []uint64) Regs {
	var r Regs
	a := arch.info()
	if a == nil {
		return r
	}
	i := 0
	for bit := 0; bit < 64 && i < len(vals); bit++ {
		if mask&(1<<uint(bit)) == 0 {
			continue
		}
		if dw := a.perfToDWARF[bit]; dw >= 0 {
			r.set(int(dw), vals[i])
		}
		i++
	}
	return r
}
