package recorder

import (
	"encoding/binary"
	"testing"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"github.com/faultline/faultline/perfdata"
)

// TestInprocFormats parses the in-process events' formats with perfdata's
// tracefs format parser and checks that each field sits where writeShim
// and writeCall put it: fields back to back from offset 8, in the order
// the uprobe method's probes list them.
func TestInprocFormats(t *testing.T) {
	cfg := testConfig()
	cfg.InProcess, cfg.TopWords = true, 16
	s := &session{cfg: cfg, inproc: &inproc{words: 16}}
	specs := s.buildSpecs()
	seen := map[string]bool{}
	for _, sp := range specs {
		if sp.format == nil {
			continue
		}
		f, err := perfdata.ParseTraceFormat(shimSystem, sp.format)
		if err != nil {
			t.Fatalf("%s: %v\n%s", sp.name, err, sp.format)
		}
		if uint64(f.ID) != sp.attr.Config || shimSystem+":"+f.Name != sp.name {
			t.Errorf("%s: format says %s id %d, attr config %d", sp.name, f.Name, f.ID, sp.attr.Config)
		}
		seen[f.Name] = true
		off := 8
		for _, fld := range f.Fields {
			if fld.Offset < 8 {
				continue // common fields
			}
			if fld.Offset != off {
				t.Errorf("%s: field %s at %d, want %d", sp.name, fld.Name, fld.Offset, off)
			}
			off += fld.Size
		}
	}
	for _, name := range []string{"malloc", "malloc_short", "malloc__return", "malloc__call", "free",
		"calloc__call", "posix_memalign__call", "reallocarray_short"} {
		if !seen[name] {
			t.Errorf("no event %s", name)
		}
	}
	call := s.inproc.call[shim.FuncCalloc]
	f, _ := perfdata.ParseTraceFormat(shimSystem, call.format)
	var names []string
	for _, fld := range f.Fields {
		if fld.Offset >= 8 {
			names = append(names, fld.Name)
		}
	}
	want := []string{"__probe_ip", "nmemb", "size", "__probe_ret_ip", "ptr", "hdr"}
	if len(names) != len(want) {
		t.Fatalf("calloc__call fields %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("calloc__call fields %v, want %v", names, want)
			break
		}
	}
}

// TestProcMapsUserCode checks the caller test behind the compact events:
// the program's own code is user code, a system library's is not, and an
// address in no mapping is not (its words are kept).
func TestProcMapsUserCode(t *testing.T) {
	m := &procMaps{}
	m.addCode(codeRange{addrRange{0x7f0000, 0x7f8000}, true}) // libc
	m.addCode(codeRange{addrRange{0x400000, 0x401000}, false})
	m.addCode(codeRange{addrRange{0x500000, 0x502000}, false})
	for _, c := range []struct {
		pc   uint64
		user bool
	}{{0x400000, true}, {0x400fff, true}, {0x401000, false}, {0x501234, true}, {0x7f1000, false}, {0x3fffff, false}, {0x900000, false}} {
		if got := m.userCode(c.pc); got != c.user {
			t.Errorf("userCode(%#x) = %v, want %v", c.pc, got, c.user)
		}
	}
	// A new mapping over an old one replaces it (dlclose, then dlopen).
	m.addCode(codeRange{addrRange{0x500000, 0x501000}, true})
	if m.userCode(0x500800) || m.userCode(0x501800) {
		t.Errorf("the replaced mapping still counts: %+v", m.code)
	}
}

// TestFinishRaw checks the RAW part's padding: u32 size + payload rounded
// up to 8 bytes, the size being what follows it, as the kernel writes.
func TestFinishRaw(t *testing.T) {
	for n := 0; n < 20; n++ {
		b := binary.NativeEndian.AppendUint32([]byte{9, 9, 9}, 0)
		b = append(b, make([]byte, n)...)
		b = finishRaw(b, 3)
		if (len(b)-3)%8 != 0 || int(binary.NativeEndian.Uint32(b[3:])) != len(b)-3-4 {
			t.Errorf("payload %d: %d bytes, size field %d", n, len(b)-3, binary.NativeEndian.Uint32(b[3:]))
		}
	}
}
