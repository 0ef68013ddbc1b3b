package analyze

import (
	"encoding/binary"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata"
)

// TestClassifyInprocEvents: faultline record's in-process events read as
// the uprobe method's — malloc_short is malloc's entry, malloc__call a
// whole call (entry and return fields), free a free with only its
// pointer, posix_memalign__return with ptr and ret a pointer, not a
// status.
func TestClassifyInprocEvents(t *testing.T) {
	f8 := func(name string, off int) perfdata.TraceField {
		return perfdata.TraceField{Name: name, Offset: off, Size: 8}
	}
	ev := func(name string, fields ...perfdata.TraceField) *perfdata.Event {
		return &perfdata.Event{Name: "faultline:" + name, Attr: perfdata.Attr{Type: perfdata.TypeTracepoint},
			Format: &perfdata.TraceFormat{System: "faultline", Name: name, Fields: fields}}
	}
	cases := []struct {
		ev     *perfdata.Event
		role   Role
		kind   attribute.AllocKind
		status bool
	}{
		{ev("malloc_short", f8("__probe_ip", 8), f8("size", 16), f8("sp", 24), f8("s0", 32)), RoleAllocEntry, attribute.KindMalloc, false},
		{ev("malloc__call", f8("__probe_ip", 8), f8("size", 16), f8("__probe_ret_ip", 24), f8("ptr", 32), f8("hdr", 40)), RoleAllocCall, attribute.KindMalloc, false},
		{ev("calloc__call", f8("__probe_ip", 8), f8("nmemb", 16), f8("size", 24), f8("__probe_ret_ip", 32), f8("ptr", 40), f8("hdr", 48)), RoleAllocCall, attribute.KindCalloc, false},
		{ev("free", f8("ptr", 8)), RoleFree, 0, false},
		{ev("posix_memalign__return", f8("__probe_func", 8), f8("__probe_ret_ip", 16), f8("ptr", 24), f8("hdr", 32),
			perfdata.TraceField{Name: "ret", Offset: 40, Size: 4, Signed: true}), RoleAllocReturn, attribute.KindMemalign, false},
		{ev("posix_memalign__return", f8("__probe_func", 8), f8("__probe_ret_ip", 16), f8("ret", 24)), RoleAllocReturn, attribute.KindMemalign, true},
	}
	for _, c := range cases {
		in, err := classify(c.ev, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.ev.Name, err)
		}
		if in.role != c.role || in.role != RoleFree && in.kind != c.kind || in.statusReturn != c.status {
			t.Errorf("%s: role %v kind %v status %v, want %v %v %v", c.ev.Name, in.role, in.kind, in.statusReturn, c.role, c.kind, c.status)
		}
		if c.role == RoleAllocCall && (in.size == nil || in.ptr == nil || in.retIP == nil || in.hdr == nil) {
			t.Errorf("%s: fields %+v", c.ev.Name, in)
		}
	}
}

// TestMallocxZero: a mallocx whose flags carry MALLOCX_ZERO (0x40, as
// jemalloc's public header defines it) allocates zeroed memory, as calloc does; one
// without it, plain memory.
func TestMallocxZero(t *testing.T) {
	ev := &perfdata.Event{Name: "probe_app:mallocx", Attr: perfdata.Attr{Type: perfdata.TypeTracepoint},
		Format: &perfdata.TraceFormat{System: "probe_app", Name: "mallocx", Fields: []perfdata.TraceField{
			{Name: "__probe_ip", Offset: 8, Size: 8}, {Name: "size", Offset: 16, Size: 8}, {Name: "flags", Offset: 24, Size: 8}}}}
	in, err := classify(ev, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ru run
	for _, c := range []struct {
		flags uint64
		want  attribute.AllocKind
	}{{0x40, attribute.KindCalloc}, {0x40 | 4, attribute.KindCalloc}, {4, attribute.KindMalloc}, {0, attribute.KindMalloc}} {
		raw := make([]byte, 32)
		binary.LittleEndian.PutUint64(raw[16:], 100)
		binary.LittleEndian.PutUint64(raw[24:], c.flags)
		e := ru.entryOf(in, &perfdata.Sample{Raw: raw})
		if e.Kind != c.want || e.Size != 100 {
			t.Errorf("flags %#x: kind %v size %d, want %v 100", c.flags, e.Kind, e.Size, c.want)
		}
	}
}
