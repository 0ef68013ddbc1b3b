package symbolize

import (
	"testing"

	"github.com/faultline/faultline/perfdata"
)

// TestCanonicalLocations: the same file range mapped by two processes at
// different addresses (ASLR) gives one location per code address, with the
// file-relative address perf script prints unchanged; anonymous memory and
// a different file range stay apart.
func TestCanonicalLocations(t *testing.T) {
	s := bareSession(t)
	mmap := func(pid uint32, addr, pgoff uint64, file string) {
		s.Observe(&perfdata.Mmap{RecordCommon: perfdata.RecordCommon{Type: perfdata.RecordMmap2, SampleID: perfdata.SampleID{Pid: pid, Tid: pid}},
			Pid: pid, Tid: pid, Addr: addr, Len: 0x10000, Pgoff: pgoff, Filename: file, Prot: 5, Ino: 42, Maj: 8, Min: 1})
	}
	mmap(1, 0x555500000000, 0x1000, "/usr/lib/gcc/x86_64-linux-gnu/12/cc1")
	mmap(2, 0x563400000000, 0x1000, "/usr/lib/gcc/x86_64-linux-gnu/12/cc1")
	mmap(3, 0x563400000000, 0x2000, "/usr/lib/gcc/x86_64-linux-gnu/12/cc1") // another range of the file
	mmap(1, 0x7f0000000000, 0, "//anon")
	mmap(2, 0x7f1000000000, 0, "//anon")

	loc := func(pid uint32, pc uint64) LocID {
		p, m := s.canonical(pc, s.Maps.find(pid, pc))
		return s.intern(Loc{PC: p, Map: m, Return: true})
	}
	a, b := loc(1, 0x555500000123), loc(2, 0x563400000123)
	if a != b {
		t.Errorf("cc1+0x1123 in two processes: locations %d and %d, want one", a, b)
	}
	if got := s.Loc(b).relAddr(); got != 0x1123 {
		t.Errorf("RelAddr = %#x, want 0x1123 (PC - start + pgoff, as perf script prints)", got)
	}
	if c := loc(3, 0x563400000123); c == a {
		t.Errorf("a different file offset shares location %d", c)
	}
	if x, y := loc(1, 0x7f0000000010), loc(2, 0x7f1000000010); x == y {
		t.Errorf("anonymous memory of two processes shares location %d", x)
	}
}

// bareSession is a session of a recording with no meta data (x86-64, no
// build IDs) and an empty environment, closed when t ends.
func bareSession(t *testing.T) *Session {
	t.Helper()
	s, err := NewSession(Config{Getenv: func(string) string { return "" }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
