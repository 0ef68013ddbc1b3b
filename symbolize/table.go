package symbolize

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize/binfile"
	"github.com/faultline/faultline/symbolize/internal/cfi"
	"github.com/faultline/faultline/symbolize/unwind"
	"golang.org/x/sys/unix"
)

// Table interns the locations and stacks of a recording and names them: it
// opens each mapping's binary (and unwind table, for the unwinder) once,
// and symbolizes locations on demand, caching the names. Not safe for
// concurrent use, except where a method says so.
type Table struct {
	cache    *binfile.Cache
	kallsyms *binfile.Kallsyms
	buildIDs map[string]string // recorded path → build id (hex) from the BUILD_ID feature
	tables   map[*binfile.Binary]*cfi.Table
	tableErr map[*binfile.Binary]error
	// infoMu guards opening binaries and tables (cache, tables, tableErr,
	// warnings): parallel walkers (walk.go) load them too.
	infoMu   sync.Mutex
	warnings []error
	warned   map[string]bool

	locIndex   map[locKey]LocID
	locs       []Loc
	stackIndex map[uint64][]StackID
	stackData  []LocID
	stackOff   []uint32 // stack i is stackData[stackOff[i]:stackOff[i+1]]
	seed       maphash.Seed

	canon map[mapIdentity]*Mapping
	lines map[lineKey][]binfile.Frame
}

// StackID names an interned stack: a sequence of locations, leaf first.
// 0 is the empty stack.
type StackID uint32

// LocID names an interned location: a PC in a mapping.
type LocID uint32

// Loc is one interned location.
type Loc struct {
	PC     uint64
	Map    *Mapping // nil: in no known mapping
	Return bool     // a return address: its call is at PC-1
	Kernel bool
	Kind   unwind.FrameKind
}

type locKey struct {
	pc     uint64
	m      *Mapping
	ret    bool
	kernel bool
}

// mapInfo is what a Mapping's binary gives the unwinder and the symbolizer,
// loaded on first use.
type mapInfo struct {
	bin   *binfile.Binary
	table *cfi.Table
	bias  uint64
	err   error
	// noCode: the unwinder finds no code here (anonymous memory, stack,
	// heap, the uprobes trampoline page).
	noCode bool
	// refused: the file found is not the binary that ran.
	refused bool
}

type lineKey struct {
	id    LocID
	exact bool // symbolize PC itself (perf script's convention) rather than PC-1
}

func newTable(loc binfile.Locator) *Table {
	return &Table{
		cache:      binfile.NewCache(loc),
		buildIDs:   map[string]string{},
		tables:     map[*binfile.Binary]*cfi.Table{},
		tableErr:   map[*binfile.Binary]error{},
		warned:     map[string]bool{},
		locIndex:   map[locKey]LocID{},
		locs:       []Loc{{}}, // LocID 0 is unused
		stackIndex: map[uint64][]StackID{},
		stackOff:   []uint32{0, 0}, // StackID 0 is the empty stack
		seed:       maphash.MakeSeed(),
		lines:      map[lineKey][]binfile.Frame{},
		canon:      map[mapIdentity]*Mapping{},
	}
}

// AddBuildIDs records build IDs by path (the BUILD_ID feature, or pipe
// mode's HEADER_BUILD_ID records as they arrive). Not while walkers walk.
func (s *Table) AddBuildIDs(ids []perfdata.BuildID) {
	for _, b := range ids {
		if len(b.ID) > 0 && b.Filename != "" {
			// Only what is new: walkers may be reading the map.
			if id := hex.EncodeToString(b.ID); s.buildIDs[b.Filename] != id {
				s.buildIDs[b.Filename] = id
			}
		}
	}
}

// waitLoaded waits until the binaries opened so far are read in full: their
// background work (symbol tables, debug sections; see binfile). Nothing
// needs it for results; a measurement of what follows (allocations, time)
// does.
func (s *Table) waitLoaded() { s.cache.WaitLoaded() }

// Close releases the opened binaries.
func (s *Table) Close() error { return s.cache.Close() }

// Warnings returns what could not be found or used, each said once: the
// binaries' own warnings (a *binfile.NoDebugInfoError for each binary
// without debug info, ...), binaries not found, unusable unwind tables.
func (s *Table) Warnings() []error { return s.warnings }

func (s *Table) warn(key string, err error) {
	if !s.warned[key] {
		s.warned[key] = true
		s.warnings = append(s.warnings, err)
	}
}

func (s *Table) key(m *Mapping) binfile.Key {
	k := binfile.Key{Path: m.File, Ino: m.Ino, Gen: m.Gen}
	if m.Ino != 0 {
		k.Dev = unix.Mkdev(m.Maj, m.Min)
		k.MapEnd = m.Pgoff + (m.End - m.Start)
	}
	if len(m.BuildID) > 0 {
		k.BuildID = hex.EncodeToString(m.BuildID)
	} else if id, ok := s.buildIDs[m.File]; ok {
		k.BuildID = id
	}
	return k
}

// mapInfo opens m's binary and CFI on first use. A Mapping belongs to one
// goroutine (the session's, or one walker's replica); the shared state
// behind it is locked, except the binfile cache, which opens each binary
// once however many goroutines ask, and different ones in parallel.
func (s *Table) mapInfo(m *Mapping) *mapInfo {
	if mi := m.info; mi != nil {
		return mi
	}
	mi := &mapInfo{noCode: m.Anon() || m.File == "[stack]" || m.File == "[heap]" || m.File == "[uprobes]"}
	m.info = mi
	if !binfile.IsFileMapping(m.File) && m.File != "[vdso]" {
		mi.err = binfile.ErrNotFile
		return mi
	}
	b, err := s.cache.Open(s.key(m))
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	if err != nil {
		mi.err = err
		var me *binfile.MismatchError
		mi.refused = errors.As(err, &me)
		if !errors.Is(err, binfile.ErrNotFile) {
			s.warn("open "+m.File, err)
		}
		return mi
	}
	for _, w := range b.Warnings {
		s.warn(w.Error(), w) // binfile's warnings name the file already
	}
	mi.bin = b
	if t, ok := s.tables[b]; ok {
		mi.table = t
	} else if _, failed := s.tableErr[b]; !failed {
		err := b.ReserveUnwindTables()
		var t *cfi.Table
		if err == nil {
			t, err = cfi.Load(b.ELF(), b.DebugELF())
		}
		if err != nil {
			s.tableErr[b] = err
			s.warn("cfi "+m.File, fmt.Errorf("%s: no usable unwind info (%w); its frames are walked by frame pointers", m.File, err))
		} else {
			s.tables[b] = t
			mi.table = t
		}
	}
	if f := b.ELF(); f != nil {
		if bias, ok := unwind.LoadBias(f, m.Start, m.Pgoff); ok {
			mi.bias = bias
		}
	}
	return mi
}

// mapIdentity says when two mappings, in different processes or at
// different addresses (ASLR), hold the same bytes of the same file.
type mapIdentity struct {
	file       string
	buildID    string
	ino, dev   uint64
	pgoff, len uint64
}

// canonical moves pc in m to the session's shared mapping of the same file
// range: the first mapping seen of it. Every process that runs a program
// (each cc1 of a build) then shares its locations, stacks and cached
// lines, so they grow with the code run, not with the number of processes
// in the recording. The address relative to the file (Loc.relAddr), which
// perf script prints and symbolization uses, does not change. Anonymous
// and special mappings other than [vdso] stay per process.
func (s *Table) canonical(pc uint64, m *Mapping) (uint64, *Mapping) {
	if m == nil {
		return pc, nil
	}
	c := m.canon
	if c == nil {
		if m.Anon() || (m.special() && m.File != "[vdso]") {
			c = m
		} else {
			k := mapIdentity{file: m.File, buildID: string(m.BuildID), ino: m.Ino, dev: uint64(m.Maj)<<32 | uint64(m.Min), pgoff: m.Pgoff, len: m.End - m.Start}
			if c = s.canon[k]; c == nil {
				c = m
				s.canon[k] = m
			}
		}
		m.canon = c
	}
	return pc - m.Start + c.Start, c
}

func (s *Table) intern(l Loc) LocID {
	k := locKey{pc: l.PC, m: l.Map, ret: l.Return, kernel: l.Kernel}
	if id, ok := s.locIndex[k]; ok {
		return id
	}
	id := LocID(len(s.locs))
	s.locs = append(s.locs, l)
	s.locIndex[k] = id
	return id
}

func (s *Table) internStack(ids []LocID) StackID {
	if len(ids) == 0 {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(s.seed)
	var b [4]byte
	for _, id := range ids {
		b[0], b[1], b[2], b[3] = byte(id), byte(id>>8), byte(id>>16), byte(id>>24)
		h.Write(b[:])
	}
	sum := h.Sum64()
	for _, c := range s.stackIndex[sum] {
		if slices.Equal(s.Stack(c), ids) {
			return c
		}
	}
	id := StackID(len(s.stackOff) - 1)
	s.stackData = append(s.stackData, ids...)
	s.stackOff = append(s.stackOff, uint32(len(s.stackData)))
	s.stackIndex[sum] = append(s.stackIndex[sum], id)
	return id
}

// Stack returns the locations of an interned stack, leaf first. The slice
// belongs to the session.
func (s *Table) Stack(id StackID) []LocID {
	if int(id)+1 >= len(s.stackOff) {
		return nil
	}
	return s.stackData[s.stackOff[id]:s.stackOff[id+1]]
}

// Loc returns an interned location.
func (s *Table) Loc(id LocID) *Loc { return &s.locs[id] }

// Binary returns the opened binary of a mapping, or nil.
func (s *Table) Binary(m *Mapping) *binfile.Binary {
	if m == nil {
		return nil
	}
	return s.mapInfo(m).bin
}

// Lines names a location: its inline chain, innermost first (at least one
// frame; binfile.Unknown when nothing names it). exact selects perf
// script's convention of naming a return address itself; otherwise a
// return address is named by its call instruction (PC-1), as pprof and
// addr2line want. Cached per location.
func (s *Table) Lines(id LocID, exact bool) []binfile.Frame {
	k := lineKey{id, exact}
	if f, ok := s.lines[k]; ok {
		return f
	}
	l := &s.locs[id]
	var out []binfile.Frame
	if l.Kernel {
		if s.kallsyms != nil {
			out = s.kallsyms.Symbolize(l.symPC(exact), nil)
		} else {
			out = []binfile.Frame{{Func: "[kernel]"}}
		}
	} else if l.Map != nil {
		out = l.symbolize(s.Binary(l.Map), exact)
	}
	if len(out) == 0 {
		out = []binfile.Frame{{Func: binfile.Unknown}}
	}
	s.lines[k] = out
	return out
}

// symPC is the address that names l: a return address is named by its
// call instruction (PC-1) unless exact.
func (l *Loc) symPC(exact bool) uint64 {
	if l.Return && !exact {
		return l.PC - 1
	}
	return l.PC
}

// symbolize names a location in a file mapping from its binary b (nil:
// none found). Safe for concurrent use with other locations.
func (l *Loc) symbolize(b *binfile.Binary, exact bool) []binfile.Frame {
	if b == nil {
		return nil
	}
	if vaddr, ok := b.MappedVaddr(l.symPC(exact), l.Map.Start, l.Map.Pgoff); ok {
		return b.Symbolize(vaddr, nil)
	}
	return nil
}

// NameStacks names the locations of every stack interned so far on n
// goroutines, a binary per goroutine at a time, so that Lines finds them
// cached (the profile names all of them at its end, one by one). The
// names are those Lines would give.
func (s *Table) NameStacks(exact bool, n int) {
	byBin := map[*binfile.Binary][]LocID{}
	var bins []*binfile.Binary
	seen := make([]bool, len(s.locs))
	for _, id := range s.stackData {
		l := &s.locs[id]
		if seen[id] || l.Kernel || l.Map == nil {
			continue
		}
		seen[id] = true
		if _, ok := s.lines[lineKey{id, exact}]; ok {
			continue
		}
		b := s.Binary(l.Map)
		if b == nil {
			continue
		}
		if byBin[b] == nil {
			bins = append(bins, b)
		}
		byBin[b] = append(byBin[b], id)
	}
	out := make([][][]binfile.Frame, len(bins))
	next := make(chan int, len(bins))
	for i := range bins {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(n, len(bins)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ids := byBin[bins[i]]
				out[i] = make([][]binfile.Frame, len(ids))
				for j, id := range ids {
					out[i][j] = s.locs[id].symbolize(bins[i], exact)
				}
			}
		}()
	}
	wg.Wait()
	for i, b := range bins {
		for j, id := range byBin[b] {
			f := out[i][j]
			if len(f) == 0 {
				f = []binfile.Frame{{Func: binfile.Unknown}}
			}
			s.lines[lineKey{id, exact}] = f
		}
	}
}

// relAddr is the address perf script prints for a location: the file
// offset (PC - start + pgoff) for file mappings, the PC itself otherwise.
func (l *Loc) relAddr() uint64 {
	if l.Map == nil || l.Kernel || l.Map.Anon() {
		return l.PC
	}
	return l.PC - l.Map.Start + l.Map.Pgoff
}

// dso names the location's mapping as perf does: the recorded path,
// "[kernel.kallsyms]" for kernel frames, "[unknown]" when unmapped.
func (l *Loc) dso() string {
	switch {
	case l.Kernel:
		return "[kernel.kallsyms]"
	case l.Map == nil:
		return "[unknown]"
	}
	return l.Map.File
}
