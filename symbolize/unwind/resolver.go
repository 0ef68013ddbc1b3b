package unwind

import (
	"debug/elf"
	"sort"

	"github.com/faultline/faultline/symbolize/internal/cfi"
)

// mapping is one executable mapping for mappings.
type mapping struct {
	Start, End uint64 // runtime addresses, End exclusive
	Bias       uint64 // runtime address − ELF virtual address
	Table      *cfi.Table
}

// mappings is a simple Resolver over a sorted slice of mappings, for the
// tests. Sort it (Sort) after adding mappings; pass a
// pointer so the interface conversion does not allocate.
type mappings []mapping

// Sort orders the mappings by Start.
func (m mappings) Sort() { sort.Slice(m, func(i, j int) bool { return m[i].Start < m[j].Start }) }

// Lookup implements Resolver.
func (m *mappings) Lookup(pc uint64) (*cfi.Table, uint64, bool) {
	s := *m
	i := sort.Search(len(s), func(i int) bool { return s[i].Start > pc }) - 1
	if i < 0 || pc >= s[i].End {
		return nil, 0, false
	}
	return s[i].Table, s[i].Bias, true
}

// LoadBias computes the load bias (runtime address − ELF virtual address)
// of an mmap of f at addr with file offset pgoff, as an MMAP2 record
// reports it. ok is false when no PT_LOAD segment holds pgoff. Calling it
// with a hostile *elf.File is safe: it only reads f.Progs.
func LoadBias(f *elf.File, addr, pgoff uint64) (bias uint64, ok bool) {
	// runtime(x) = addr + (x − pgoff); vaddr(x) = p.Vaddr + (x − p.Off).
	// The mapping starts at the page holding the segment's first byte;
	// prefer the segment starting in that page (4 KiB, then 64 KiB pages),
	// else one containing pgoff.
	for _, page := range [2]uint64{0x1000, 0x10000} {
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Off&^(page-1) == pgoff {
				return addr - pgoff + p.Off - p.Vaddr, true
			}
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Off <= pgoff && pgoff < p.Off+p.Filesz {
			return addr - pgoff + p.Off - p.Vaddr, true
		}
	}
	return 0, false
}
