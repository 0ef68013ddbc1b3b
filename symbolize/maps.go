package symbolize

import (
	"sort"
	"strings"
)

// Mapping is one mapped region of a process as a MMAP/MMAP2 record described
// it. Mappings are immutable once made: a later mmap over part of one makes
// new Mappings for the parts that survive, so a *Mapping held by a frame
// stays true to the time it was resolved.
type Mapping struct {
	Start, End uint64 // [Start, End) in the process's address space
	Pgoff      uint64 // file offset of Start
	File       string // recorded path, or "//anon", "[heap]", "[stack]", "[vdso]", ...
	BuildID    []byte // from an MMAP2 build-id record, else nil (the caller may fill it from the BUILD_ID feature)
	Prot       uint32
	Exec       bool // PROT_EXEC, or an MMAP record (which perf writes only for executable maps unless -d)
	Ino        uint64
	Gen        uint64 // inode generation (MMAP2)
	Maj, Min   uint32

	canon *Mapping // the Session's shared mapping of the same file range; set on first use
	info  *mapInfo // its binary and unwind table; set on first use
}

// Anon reports whether the mapping is anonymous memory (no file).
func (m *Mapping) Anon() bool {
	return m.File == "//anon" || m.File == "" || strings.HasPrefix(m.File, "/dev/zero") ||
		strings.HasPrefix(m.File, "/anon_hugepage") || strings.HasPrefix(m.File, "/memfd:")
}

// special reports names like [vdso], [stack], [heap], [uprobes] that are not files.
func (m *Mapping) special() bool {
	return strings.HasPrefix(m.File, "[")
}

// Maps tracks every process's mappings over a time-ordered record stream:
// threads share their process's maps, fork copies them, exec resets them.
type Maps struct {
	procs map[uint32]*procMaps

	// The last process looked up: consecutive lookups (the frames of one
	// sample, the unwinder's then the interning's) are nearly always in
	// the same process and mapping.
	lastPid  uint32
	lastProc *procMaps
	// gen counts changes (Add, Fork, Exec, Exit): a lookup result keyed
	// by gen holds while gen does.
	gen uint64
}

type procMaps struct {
	maps []*Mapping // sorted by Start, non-overlapping
	last *Mapping   // the mapping Find returned last
}

// newMaps returns an empty process table.
func newMaps() *Maps { return &Maps{procs: make(map[uint32]*procMaps)} }

func (m *Maps) proc(pid uint32) *procMaps {
	p := m.procs[pid]
	if p == nil {
		p = &procMaps{}
		m.procs[pid] = p
	}
	return p
}

// Add records a new mapping in pid; it replaces whatever it overlaps.
func (m *Maps) Add(pid uint32, nm *Mapping) {
	if nm.End <= nm.Start {
		return
	}
	m.gen++
	p := m.proc(pid)
	p.last = nil
	i := sort.Search(len(p.maps), func(i int) bool { return p.maps[i].End > nm.Start })
	j := i
	var keep []*Mapping
	for ; j < len(p.maps) && p.maps[j].Start < nm.End; j++ {
		old := p.maps[j]
		if old.Start < nm.Start {
			left := *old
			left.End = nm.Start
			left.canon, left.info = nil, nil
			keep = append(keep, &left)
		}
		if old.End > nm.End {
			right := *old
			right.Start = nm.End
			right.canon, right.info = nil, nil
			if !right.Anon() {
				right.Pgoff += nm.End - old.Start
			}
			keep = append(keep, &right)
		}
	}
	repl := make([]*Mapping, 0, len(keep)+1)
	for _, k := range keep {
		if k.Start < nm.Start {
			repl = append(repl, k)
		}
	}
	repl = append(repl, nm)
	for _, k := range keep {
		if k.Start >= nm.End {
			repl = append(repl, k)
		}
	}
	p.maps = append(p.maps[:i], append(repl, p.maps[j:]...)...)
}

// find returns pid's mapping containing addr, or nil.
func (m *Maps) find(pid uint32, addr uint64) *Mapping {
	p := m.lastProc
	if p == nil || m.lastPid != pid {
		p = m.procs[pid]
		if p == nil {
			return nil
		}
		m.lastPid, m.lastProc = pid, p
	}
	if l := p.last; l != nil && l.Start <= addr && addr < l.End {
		return l
	}
	maps := p.maps
	i := sort.Search(len(maps), func(i int) bool { return maps[i].End > addr })
	if i < len(maps) && maps[i].Start <= addr {
		p.last = maps[i]
		return maps[i]
	}
	return nil
}

// fork gives child a copy of pid's maps. A new thread (child == pid) shares them.
func (m *Maps) fork(pid, child uint32) {
	if pid == child {
		return
	}
	m.lastProc = nil
	m.gen++
	src := m.procs[pid]
	if src == nil {
		delete(m.procs, child)
		return
	}
	m.procs[child] = &procMaps{maps: append([]*Mapping(nil), src.maps...)}
}

// exec clears pid's maps: the new program's mappings follow as new records.
func (m *Maps) exec(pid uint32) { m.lastProc = nil; m.gen++; delete(m.procs, pid) }

// exit forgets pid.
func (m *Maps) exit(pid uint32) { m.lastProc = nil; m.gen++; delete(m.procs, pid) }

// each calls fn for every mapping of pid in address order.
func (m *Maps) each(pid uint32, fn func(*Mapping)) {
	if p := m.procs[pid]; p != nil {
		for _, mp := range p.maps {
			fn(mp)
		}
	}
}
