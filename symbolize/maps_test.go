package symbolize

import (
	"fmt"
	"strings"
	"testing"
)

func dump(m *Maps, pid uint32) string {
	var b strings.Builder
	m.each(pid, func(mp *Mapping) { fmt.Fprintf(&b, "%x-%x@%x %s;", mp.Start, mp.End, mp.Pgoff, mp.File) })
	return b.String()
}

func TestMapsOverlapForkExec(t *testing.T) {
	m := newMaps()
	m.Add(1, &Mapping{Start: 0x1000, End: 0x5000, Pgoff: 0, File: "/bin/a"})
	m.Add(1, &Mapping{Start: 0x8000, End: 0x9000, File: "//anon"})
	// an mmap in the middle of /bin/a splits it; the right part keeps its file offset
	m.Add(1, &Mapping{Start: 0x2000, End: 0x3000, File: "//anon"})
	want := "1000-2000@0 /bin/a;2000-3000@0 //anon;3000-5000@2000 /bin/a;8000-9000@0 //anon;"
	if got := dump(m, 1); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if mp := m.find(1, 0x3fff); mp == nil || mp.File != "/bin/a" || mp.Pgoff != 0x2000 {
		t.Fatalf("find 0x3fff = %+v", mp)
	}
	if mp := m.find(1, 0x5000); mp != nil {
		t.Fatalf("find 0x5000 = %+v, want nil", mp)
	}
	// covering several
	m.Add(1, &Mapping{Start: 0x1800, End: 0x8800, File: "/lib/b"})
	want = "1000-1800@0 /bin/a;1800-8800@0 /lib/b;8800-9000@0 //anon;"
	if got := dump(m, 1); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	m.fork(1, 2)
	m.Add(2, &Mapping{Start: 0x10000, End: 0x11000, File: "/c"})
	if strings.Contains(dump(m, 1), "/c") || !strings.Contains(dump(m, 2), "/lib/b") {
		t.Fatalf("fork did not copy: parent %s child %s", dump(m, 1), dump(m, 2))
	}
	m.exec(2)
	if dump(m, 2) != "" || m.find(2, 0x1800) != nil {
		t.Fatalf("exec did not reset: %s", dump(m, 2))
	}
}
