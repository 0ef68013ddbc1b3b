package symbolize

import "testing"

// TestFindCacheFollowsChanges: Find's last-hit cache never returns a
// mapping that an mmap, exec, exit or fork has replaced.
func TestFindCacheFollowsChanges(t *testing.T) {
	m := newMaps()
	a := &Mapping{Start: 0x1000, End: 0x9000, File: "/a"}
	m.Add(1, a)
	if got := m.find(1, 0x2000); got != a {
		t.Fatalf("Find = %v, want /a", got)
	}
	b := &Mapping{Start: 0x2000, End: 0x3000, File: "/b"}
	m.Add(1, b)
	if got := m.find(1, 0x2000); got != b {
		t.Errorf("after mmap over it: Find = %v, want /b", got)
	}
	if got := m.find(1, 0x1000); got == nil || got.File != "/a" || got.End != 0x2000 {
		t.Errorf("left part: Find = %+v, want /a ending at 0x2000", got)
	}
	m.fork(1, 2)
	if got := m.find(2, 0x2000); got != b {
		t.Errorf("forked child: Find = %v, want /b", got)
	}
	m.exec(2)
	if got := m.find(2, 0x2000); got != nil {
		t.Errorf("after exec: Find = %v, want nil", got)
	}
	if got := m.find(1, 0x2000); got != b {
		t.Errorf("parent after child's exec: Find = %v, want /b", got)
	}
	m.exit(1)
	if got := m.find(1, 0x2000); got != nil {
		t.Errorf("after exit: Find = %v, want nil", got)
	}
}
