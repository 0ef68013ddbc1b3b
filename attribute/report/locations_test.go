package report

import (
	"testing"

	"github.com/google/pprof/profile"
)

// TestUnsymbolizedLocation: a location nothing names is a function of its
// own, named by module and file offset, so two such sites stay two
// functions in pprof; its address, like its mapping's range, is the ELF
// virtual address (runtime address − load bias). The numbers are a PIE
// whose text segment is at file offset and vaddr 0x4000, loaded at
// 0x555555558000 (bias 0x555555554000).
func TestUnsymbolizedLocation(t *testing.T) {
	p := &profile.Profile{}
	b := NewLocations(p)
	m := &Mapping{File: "/usr/bin/sort", Start: 0x555555558000, Limit: 0x555555569000, Offset: 0x4000, Bias: 0x555555554000}
	l1 := b.Location(&Location{Addr: 0x55555555ae8c, Mapping: m})
	l2 := b.Location(&Location{Addr: 0x55555555dea4, Mapping: m})
	for _, c := range []struct {
		loc  *profile.Location
		name string
		addr uint64
	}{{l1, "sort+0x6e8c", 0x6e8c}, {l2, "sort+0x9ea4", 0x9ea4}} {
		if len(c.loc.Line) != 1 || c.loc.Line[0].Function.Name != c.name || c.loc.Address != c.addr {
			t.Errorf("location %+v, want %s at %#x", c.loc, c.name, c.addr)
		}
	}
	if l1.Line[0].Function == l2.Line[0].Function || len(p.Function) != 2 {
		t.Errorf("two unsymbolized sites share a function: %+v", p.Function)
	}
	if pm := p.Mapping[0]; pm.Start != 0x4000 || pm.Limit != 0x15000 || pm.Offset != 0x4000 {
		t.Errorf("mapping %#x-%#x offset %#x, want 0x4000-0x15000 offset 0x4000", pm.Start, pm.Limit, pm.Offset)
	}
	if err := p.CheckValid(); err != nil {
		t.Error(err)
	}
}
