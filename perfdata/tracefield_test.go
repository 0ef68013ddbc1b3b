package perfdata

import "testing"

// TestParseTraceFieldDynamic: a dynamic array's name follows its brackets
// (the kernel's sched_process_exec writes "__data_loc char[] filename").
func TestParseTraceFieldDynamic(t *testing.T) {
	for _, c := range []struct{ line, name, typ string }{
		{"\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;", "filename", "__data_loc char[]"},
		{"\tfield:__data_loc u64[] ranges;\toffset:64;\tsize:4;\tsigned:0;", "ranges", "__data_loc u64[]"},
		{"\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;", "comm", "char [16]"},
	} {
		f, err := parseTraceField(c.line)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name != c.name || f.Type != c.typ {
			t.Errorf("%q: name %q type %q, want %q, %q", c.line, f.Name, f.Type, c.name, c.typ)
		}
	}
	raw := make([]byte, 24)
	raw[8], raw[10] = 16, 8 // offset 16, length 8
	raw[16] = 0xab
	f, _ := parseTraceField("\tfield:__data_loc u64[] ranges;\toffset:8;\tsize:4;\tsigned:0;")
	if b, ok := f.Bytes(raw); !ok || len(b) != 8 || b[0] != 0xab {
		t.Errorf("Bytes: %x %v, want the 8 bytes at 16", b, ok)
	}
}
