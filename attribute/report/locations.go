package report

import (
	"encoding/hex"
	"fmt"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/binfile"
	"github.com/faultline/faultline/symbolize/unwind"
	"github.com/google/pprof/profile"
)

// Symbols resolves a symbolize.Session's locations into Locations: the one
// rule by which every profile faultline writes names an address. A
// mapping's build ID is the recording's (the MMAP2 record's), else that of
// the binary the session opened for it; a return address stands for its
// call instruction, as perf prints callers and as its lines are named, so
// that pprof's source and disassembly views put the samples on the call's
// line; frames nothing names have no lines.
type Symbols struct {
	sess *symbolize.Session
	maps map[*symbolize.Mapping]*Mapping
}

// NewSymbols returns the Symbols of sess.
func NewSymbols(sess *symbolize.Session) *Symbols {
	return &Symbols{sess: sess, maps: map[*symbolize.Mapping]*Mapping{}}
}

func (s *Symbols) mapping(m *symbolize.Mapping) *Mapping {
	if m == nil {
		return nil
	}
	if rm, ok := s.maps[m]; ok {
		return rm
	}
	rm := &Mapping{File: m.File, Start: m.Start, Limit: m.End, Offset: m.Pgoff}
	b := s.sess.Binary(m)
	if len(m.BuildID) > 0 {
		rm.BuildID = hex.EncodeToString(m.BuildID)
	} else if b != nil {
		rm.BuildID = b.BuildID
	}
	if b != nil && b.ELF() != nil {
		if bias, ok := unwind.LoadBias(b.ELF(), m.Start, m.Pgoff); ok && bias <= m.Start {
			rm.Bias = bias
		}
	}
	s.maps[m] = rm
	return rm
}

// Location resolves one of the session's locations.
func (s *Symbols) Location(id symbolize.LocID) Location {
	l := s.sess.Loc(id)
	pc := l.PC
	if l.Return {
		pc--
	}
	loc := Location{Addr: pc, Mapping: s.mapping(l.Map)}
	for _, f := range s.sess.Lines(id, false) {
		if f.Func == binfile.Unknown {
			continue
		}
		loc.Lines = append(loc.Lines, Line{Function: f.Func, SystemName: f.System, File: f.File, Line: int64(f.Line)})
	}
	return loc
}

// Stack implements Stacks over the session's interned stacks (the
// tracker's StackIDs are the session's).
func (s *Symbols) Stack(id attribute.StackID) []Location {
	ids := s.sess.Stack(symbolize.StackID(id))
	out := make([]Location, 0, len(ids))
	for _, lid := range ids {
		out = append(out, s.Location(lid))
	}
	return out
}

type locKey struct {
	addr uint64
	m    *profile.Mapping
	// skip: the location's innermost inlined lines left out (siteStack)
	skip int
	// unknown-address pseudo locations are keyed by name
	name string
}

type funcKey struct{ name, system, file string }

// Locations adds resolved Locations to a profile: the one place faultline
// makes pprof mappings, locations and functions. Each is deduplicated by
// its content and gets the next ID of its list (unique and non-zero, as
// pprof requires).
type Locations struct {
	p     *profile.Profile
	maps  map[Mapping]*profile.Mapping
	locs  map[locKey]*profile.Location
	funcs map[funcKey]*profile.Function
}

// NewLocations returns a Locations that adds to p, which has no mappings,
// locations or functions yet.
func NewLocations(p *profile.Profile) *Locations {
	return &Locations{
		p:     p,
		maps:  map[Mapping]*profile.Mapping{},
		locs:  map[locKey]*profile.Location{},
		funcs: map[funcKey]*profile.Function{},
	}
}

// intern returns the profile entry that seen holds for key k. The first
// time, it makes the entry with newEntry, giving it the next ID of list,
// and adds it to seen and list.
func intern[K comparable, E any](seen map[K]*E, k K, list *[]*E, newEntry func(id uint64) *E) *E {
	if e := seen[k]; e != nil {
		return e
	}
	e := newEntry(uint64(len(*list) + 1))
	seen[k] = e
	*list = append(*list, e)
	return e
}

func (b *Locations) mapping(m *Mapping) *profile.Mapping {
	if m == nil {
		return nil
	}
	return intern(b.maps, *m, &b.p.Mapping, func(id uint64) *profile.Mapping {
		return &profile.Mapping{
			ID:              id,
			Start:           m.Start - m.Bias,
			Limit:           m.Limit - m.Bias,
			Offset:          m.Offset,
			File:            m.File,
			BuildID:         m.BuildID,
			HasFunctions:    true,
			HasFilenames:    true,
			HasLineNumbers:  true,
			HasInlineFrames: true,
		}
	})
}

func (b *Locations) function(name, system, file string) *profile.Function {
	return intern(b.funcs, funcKey{name, system, file}, &b.p.Function, func(id uint64) *profile.Function {
		// Function.Name as pprof's symbolizer shows names (no parameters,
		// no template arguments), the full name in SystemName.
		if system == "" {
			system = name
		}
		return &profile.Function{ID: id, Name: functionName(name, system), SystemName: system, Filename: file}
	})
}

// Location returns the profile's location for l, adding it (and its
// mapping and functions) the first time. Its address is module-relative
// (the ELF virtual address) when the mapping's load bias is known, as its
// mapping is, so that `pprof -addresses` prints the same address for every
// run and pprof's -list and -disasm find the code with a base of zero. A
// location nothing names is a function of its own, named by its module
// and file offset ("sort+0x6e8c", as perf script prints it), so that
// pprof's views keep apart the sites the summary keeps apart instead of
// merging them under the module's name.
func (b *Locations) Location(l *Location) *profile.Location {
	m := b.mapping(l.Mapping)
	addr := l.Addr
	if l.Mapping != nil {
		addr -= l.Mapping.Bias
	}
	return intern(b.locs, locKey{addr: addr, m: m}, &b.p.Location, func(id uint64) *profile.Location {
		loc := &profile.Location{ID: id, Address: addr, Mapping: m}
		// pprof lists a location's lines caller-last: the innermost
		// inlined function first, which is our order too.
		for _, ln := range l.Lines {
			loc.Line = append(loc.Line, profile.Line{Function: b.function(ln.Function, ln.SystemName, ln.File), Line: ln.Line})
		}
		if len(loc.Line) == 0 && l.Mapping != nil && l.Mapping.File != "" && l.Addr >= l.Mapping.Start {
			name := fmt.Sprintf("%s+%#x", baseName(l.Mapping.File), l.Addr-l.Mapping.Start+l.Mapping.Offset)
			loc.Line = []profile.Line{{Function: b.function(name, name, "")}}
		}
		return loc
	})
}

// siteStack cuts an allocation's stack to start at its site frame
// (UserFrame): the locations below it go, and the site's location keeps
// only the lines from the site frame out, so pprof's flat column shows the
// site. via is the library function the site called (UserFrame's via); a
// stack that needs no cut comes back as it is, with via "".
func (b *Locations) siteStack(locs []*profile.Location) ([]*profile.Location, string) {
	frames := SiteFrames(locs)
	if name, own := AllocatorOwn(frames); own {
		// The allocator's own: its name is the site, its stack the callers.
		return append([]*profile.Location{b.classLocation(name)}, locs...), ""
	}
	return b.userStack(locs, frames)
}

// userStack cuts a stack (frames is SiteFrames(locs)) to start at its
// first frame in the user's own code (UserFrame), as siteStack does but
// for any stack: a fault's touching stack too.
func (b *Locations) userStack(locs []*profile.Location, frames []SiteFrame) ([]*profile.Location, string) {
	i, via := UserFrame(frames)
	if i == 0 {
		return locs, ""
	}
	f := frames[i]
	li := 0
	for locs[li] != f.Loc {
		li++
	}
	skip := 0
	if f.Line != nil {
		for &f.Loc.Line[skip] != f.Line {
			skip++
		}
	}
	out := make([]*profile.Location, 0, len(locs)-li)
	if skip == 0 {
		return append(out, locs[li:]...), via
	}
	loc := locs[li]
	cut := intern(b.locs, locKey{addr: loc.Address, m: loc.Mapping, skip: skip}, &b.p.Location, func(id uint64) *profile.Location {
		return &profile.Location{ID: id, Address: loc.Address, Mapping: loc.Mapping, Line: append([]profile.Line(nil), loc.Line[skip:]...)}
	})
	return append(append(out, cut), locs[li+1:]...), via
}

// classLocation is the pseudo leaf naming what an unattributed fault
// touched: a location with no mapping whose function is the class.
func (b *Locations) classLocation(class string) *profile.Location {
	return intern(b.locs, locKey{name: class}, &b.p.Location, func(id uint64) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: b.function(class, class, "")}}}
	})
}
