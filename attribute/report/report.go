// Package report turns the tracker's results into a pprof profile
// (github.com/google/pprof/profile) and a summary people can read.
//
// Sample types, in this order: faults/count (the default), allocs/count,
// alloc_space/bytes, and with Builder.Res resident_peak/bytes and
// resident_end/bytes. Labels: flag (fast, mmap, zero; several allowed), comm,
// thread ("TID NAME"), via (the library call, or mmap: the program's own
// mapping), refault=yes (a fault on a page released before),
// access (read/write/exec where the event says), inside=allocator (faults
// the allocator took on its own memory serving the call), and in touch mode
// alloc_site. Locations carry absolute addresses, their mappings and
// symbolized lines (inlined frames first), so `go tool pprof` shows names
// without the binaries. Symbols and Locations are the one bridge from
// symbolized addresses to pprof: every profile faultline writes, analyze's
// and correlate's, gets its mappings, locations and functions through them.
package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata/schema"
	"github.com/google/pprof/profile"
)

// InsideLabel marks faults taken inside an allocator call on the
// allocator's own heap or arena memory outside the new chunk (a new top
// chunk, heap_info, tcache setup), charged to the allocation the call made:
// inside=allocator.
const InsideLabel = "inside"

// ThreadLabel names the thread of a sample's event: "TID" or "TID NAME".
const ThreadLabel = "thread"

// Mode selects whose stack a fault sample carries.
type Mode int

const (
	// ByAlloc: the allocation's stack, allocator frames dropped.
	ByAlloc Mode = iota
	// ByTouch: the faulting code's stack, with the allocation's caller as
	// label alloc_site.
	ByTouch
)

// Mapping is a binary mapped into a process, as pprof wants it.
type Mapping struct {
	File    string
	BuildID string // hex
	Start   uint64
	Limit   uint64
	Offset  uint64
	// Bias is the load bias (runtime address − ELF virtual address) when
	// the binary was found, else 0: profiles hold addresses less it.
	Bias uint64
}

// Line is one symbolized frame at an address.
type Line struct {
	Function   string // demangled
	SystemName string // linkage name
	File       string
	Line       int64
}

// Location is one frame of a resolved stack.
type Location struct {
	Addr    uint64   // absolute address; for callers, the return address
	Mapping *Mapping // nil when the address is in no known mapping
	Lines   []Line   // innermost (inlined) first; empty when unknown
}

// Stacks resolves the tracker's interned stacks, leaf first.
type Stacks interface {
	Stack(id attribute.StackID) []Location
}

// IsAllocator reports whether a function name is an allocator entry point
// (of any family in schema.EntryPoints), whose frames are dropped from allocation stacks so the leaf is the caller.
func IsAllocator(name string) bool {
	switch name {
	case "malloc", "__libc_malloc", "__GI___libc_malloc", "__malloc",
		"calloc", "__libc_calloc", "__calloc",
		"realloc", "__libc_realloc", "__GI___libc_realloc", "__realloc",
		"reallocarray", "__libc_reallocarray",
		"memalign", "__libc_memalign", "aligned_alloc", "posix_memalign", "__posix_memalign",
		"valloc", "__libc_valloc", "pvalloc", "__libc_pvalloc",
		"_mid_memalign", "tcache_init", "malloc_hook_ini",
		"operator new(unsigned long)", "operator new[](unsigned long)",
		"operator new(unsigned long, std::nothrow_t const&)", "operator new[](unsigned long, std::nothrow_t const&)",
		"operator new(unsigned long, std::align_val_t)", "operator new[](unsigned long, std::align_val_t)",
		"_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t":
		return true
	}
	// Every family's entry points (tc_malloc, mi_malloc, mallocx, ...),
	// by symbol: a stack names a function by one of its aliases.
	return schema.IsEntrySymbol(name)
}

type sampleKey struct {
	stack     attribute.StackID
	class     string // unattributed: the class pseudo-frame
	flags     attribute.Flags
	comm      string
	access    attribute.Access
	allocSite attribute.StackID // touch mode
	touch     bool              // touch mode fault: stack is the faulting code's
	inAlloc   bool              // the allocator's own memory, taken serving the call (label inside=allocator)
	thread    string
	stackKind string // the `stack` label (infer.go); "" without one
	mapped    bool   // the site is the program's own mmap call (via=mmap)
	refault   bool   // a fault on a page released before (label refault=yes)
}

// Builder aggregates the tracker's results; it implements attribute.Sink.
type Builder struct {
	Mode Mode
	// CommOf names the process at the time of the event (nil: no comm label).
	CommOf func(pid uint32) string
	// ThreadOf names a thread for the thread label: its tid and, where the
	// recording has it, its name (nil: no thread label).
	ThreadOf func(pid, tid uint32) string
	// StackKind, when set, says whether an allocation's site is a sampled
	// stack or only its leaf (StackSampled, StackLeaf): the samples then
	// carry a `stack` label (StackLabel).
	StackKind func(site attribute.StackID) string
	// RawSites keeps an allocation's raw leaf (the allocator's caller, often
	// a library frame) in the profile; by default the leaf is the site frame
	// (the first frame of the program's own code, UserFrame) and the library
	// call is the sample's via label.
	RawSites bool
	// TouchSites cuts ByTouch's stacks to start at their first frame in
	// the user's own code (UserFrame), as allocations' are, with the
	// library or runtime function it went through as the via label: the
	// profile of a recording with no allocator (a Go program's).
	TouchSites bool
	// Res, when set, follows the pages the faults make resident, owned by
	// the fault's sample: the profile then has resident_peak/bytes and
	// resident_end/bytes, and faults on released pages carry refault=yes.
	// The caller feeds it the releases (munmap, madvise, exit).
	Res *attribute.Resident
	// OwnerAt, with Res, names the owner of a page a huge-page fault
	// mapped besides the one it touched (Owner gives the numbers).
	OwnerAt attribute.OwnerAt

	agg   map[sampleKey]*[nValues]int64 // faults, allocs, bytes, resident peak and end, untouched, huge (bytes; resident and huge once settled)
	index map[sampleKey]int
	// Res's owners: a site (or an unattributed fault's class and stack)
	// and comm, numbered as first touched. settled: their counts were
	// copied into agg (settle); ownerOf maps them to the samples that
	// carry them since.
	owners  map[resKey]int
	ownerKs []resKey
	settled bool
	ownerOf []int
	order   []sampleKey // first-seen order, for a deterministic profile
}

// NewBuilder returns a Builder in mode m.
func NewBuilder(m Mode, commOf func(pid uint32) string) *Builder {
	return &Builder{Mode: m, CommOf: commOf, agg: make(map[sampleKey]*[nValues]int64), index: map[sampleKey]int{}, owners: map[resKey]int{}}
}

// add adds to k's values and returns k's index: its sample's in the
// profile.
func (b *Builder) add(k sampleKey, faults, allocs, space int64) int {
	v := b.agg[k]
	if v == nil {
		v = new([nValues]int64)
		b.agg[k] = v
		b.index[k] = len(b.order)
		b.order = append(b.order, k)
	}
	v[0] += faults
	v[1] += allocs
	v[2] += space
	return b.index[k]
}

func (b *Builder) comm(pid uint32) string {
	if b.CommOf == nil {
		return ""
	}
	return b.CommOf(pid)
}

func (b *Builder) thread(pid, tid uint32) string {
	if b.ThreadOf == nil {
		return ""
	}
	return b.ThreadOf(pid, tid)
}

// Allocation implements attribute.Sink.
func (b *Builder) Allocation(a *attribute.Allocation) {
	b.add(sampleKey{stack: a.Site, flags: a.Flags, comm: b.comm(a.Pid), thread: b.thread(a.Pid, a.Tid), stackKind: b.stackKind(a), mapped: a.Kind == attribute.KindMmap}, 0, 1, int64(a.Size))
}

// Fault implements attribute.Sink.
func (b *Builder) Fault(f *attribute.Fault, a *attribute.Allocation) {
	k := sampleKey{comm: b.comm(f.Pid), thread: b.thread(f.Pid, f.Tid), access: f.Access, inAlloc: f.InAllocator && a != nil}
	switch {
	case a == nil:
		k.stack, k.class = f.Stack, f.Class.String()
	case b.Mode == ByTouch:
		k.stack, k.flags, k.allocSite, k.touch = f.Stack, a.Flags, a.Site, true
	default:
		k.stack, k.flags = a.Site, a.Flags
	}
	if a != nil {
		k.stackKind = b.stackKind(a)
		k.mapped = a.Kind == attribute.KindMmap
	}
	k.refault = f.Refault
	b.add(k, 1, 0, 0)
}

// nValues is how many values a sample has with Res: faults, allocs,
// alloc_space, resident_peak, resident_end, untouched, huge.
const nValues = 7

// resKey is a resident-memory owner: what a sample of the fault will be
// matched by (settle).
type resKey struct {
	stack  attribute.StackID // the allocation's site, or an unattributed fault's stack
	class  string
	mapped bool
	comm   string
}

// Touch follows the page f touched, at f's place in the stream (before
// Sink.Fault, which can come later): it becomes resident for a's site (or
// f's class), and f.Refault says whether it had been released. File pages
// (the page cache's) and unknown addresses are not followed. A no-op
// without Res.
func (b *Builder) Touch(f *attribute.Fault, a *attribute.Allocation) {
	if b.Res == nil || b.settled {
		return
	}
	var rk resKey
	if a == nil {
		if f.Class.Kind == attribute.ClassFile || f.Class.Kind == attribute.ClassUnknown {
			return
		}
		rk = resKey{stack: f.Stack, class: f.Class.String()}
	} else {
		rk = resKey{stack: a.Site, mapped: a.Kind == attribute.KindMmap}
	}
	rk.comm = b.comm(f.Pid)
	o := b.owner(rk)
	var st attribute.PageState
	if f.PageSize > attribute.PageSize && b.OwnerAt != nil {
		start := f.Addr &^ (f.PageSize - 1)
		st = b.Res.TouchRange(f.Pid, f.Addr, start, start+f.PageSize, f.Time, o, true, b.OwnerAt)
	} else {
		st = b.Res.Touch(f.Pid, f.Addr, f.Time, o)
	}
	f.Refault = st == attribute.PageReleased
}

// owner returns rk's number as Res's owner.
func (b *Builder) owner(rk resKey) int {
	o, ok := b.owners[rk]
	if !ok {
		o = len(b.ownerKs)
		b.owners[rk] = o
		b.ownerKs = append(b.ownerKs, rk)
	}
	return o
}

// Owner returns the number Res knows the owner of a page by: a's site
// (mapped: a is the program's own mmap call), or with a nil the class of
// memory (Class.String) the page is in, in pid's program; -1 before
// settling, when owners are no longer made.
func (b *Builder) Owner(pid uint32, a *attribute.Allocation, class string) int {
	if b.settled {
		return -1
	}
	rk := resKey{class: class, comm: b.comm(pid)}
	if a != nil {
		rk = resKey{stack: a.Site, mapped: a.Kind == attribute.KindMmap, comm: rk.comm}
	}
	return b.owner(rk)
}

// Untouched adds to a's sample the bytes a never had resident while it
// lived (untouched/bytes). Inherited copies are their parent's.
func (b *Builder) Untouched(a *attribute.Allocation, bytes int64) {
	if a.Inherited || bytes <= 0 {
		return
	}
	k := sampleKey{stack: a.Site, flags: a.Flags, comm: b.comm(a.Pid), thread: b.thread(a.Pid, a.Tid), stackKind: b.stackKind(a), mapped: a.Kind == attribute.KindMmap}
	i := b.add(k, 0, 0, 0)
	b.agg[b.order[i]][5] += bytes
}

// settle copies Res's resident pages into the aggregates, once, before
// Infer or Profile rearranges them: until then Res's owners are the
// aggregates' indexes.
func (b *Builder) settle() {
	if b.settled || b.Res == nil {
		return
	}
	b.settled = true
	first := b.firstOfOwners()
	b.ownerOf = make([]int, len(b.ownerKs))
	for o, rk := range b.ownerKs {
		i, ok := first[rk]
		if !ok && b.Res.Peak(o) == 0 && b.Res.End(o) == 0 {
			b.ownerOf[o] = -1
			continue
		}
		if !ok {
			// Pages no fault of the owner's made resident (a snapshot
			// found them): a sample of their own.
			k := sampleKey{stack: rk.stack, class: rk.class, mapped: rk.mapped, comm: rk.comm}
			i = b.add(k, 0, 0, 0)
			first[rk] = i
		}
		v := b.agg[b.order[i]]
		v[3] += b.Res.Peak(o) * attribute.PageSize
		v[4] += b.Res.End(o) * attribute.PageSize
		v[6] += b.Res.HugePeak(o) * attribute.PageSize
		b.ownerOf[o] = i
	}
}

// firstOfOwners maps each resident-memory owner to the first sample of
// its faults, which gets its pages.
func (b *Builder) firstOfOwners() map[resKey]int {
	first := map[resKey]int{}
	for i, k := range b.order {
		var rk resKey
		switch {
		case k.class != "":
			rk = resKey{stack: k.stack, class: k.class}
		case k.touch:
			rk = resKey{stack: k.allocSite, mapped: k.mapped}
		default:
			rk = resKey{stack: k.stack, mapped: k.mapped}
		}
		rk.comm = k.comm
		if _, ok := first[rk]; !ok {
			first[rk] = i
		}
	}
	return first
}

// SampleOf returns the index in Profile's samples of the sample that
// carries Res's owner (the largest part, when Infer split it), or -1 when
// none does (every part was zero).
func (b *Builder) SampleOf(owner int) int {
	b.settle()
	if owner < len(b.ownerOf) {
		return b.ownerOf[owner]
	}
	return owner
}

// The sample types of a faultline profile, in value order, with their
// units, and the labels its samples carry. diff reads what Builder writes
// by these names.
const (
	SampleFaults     = "faults"      // page faults (the default sample type)
	SampleAllocs     = "allocs"      // allocations made
	SampleAllocSpace = "alloc_space" // bytes allocated
	// SampleResidentPeak is the bytes of anonymous memory the sample's
	// faults made resident and still held when the total peaked;
	// SampleResidentEnd the same at the end of the recording (a process
	// that exited: at its exit).
	SampleResidentPeak = "resident_peak"
	SampleResidentEnd  = "resident_end"
	// SampleUntouched is the bytes of the sample's allocations that were
	// never resident while they lived (whole pages: an allocation smaller
	// than a page counts as touched); SampleHuge the bytes of its
	// resident_peak that huge pages mapped.
	SampleUntouched = "untouched"
	SampleHuge      = "huge"
	UnitCount       = "count"
	UnitBytes       = "bytes"

	FlagLabel      = "flag"       // fast, mmap, zero
	CommLabel      = "comm"       // the process's command name
	AccessLabel    = "access"     // read, write, exec (tracepoint faults)
	AllocSiteLabel = "alloc_site" // by-touch mode: the allocation's caller
	ClassLabel     = "class"      // unattributed faults: [stack], [heap], [file] NAME, ...
	// ViaLabel is the library function an allocation site went through
	// (std::vector::push_back) when the profile's leaf is the site frame
	// (SiteStack): the frames between it and the allocator are not in the
	// profile.
	ViaLabel = "via"
	// RefaultLabel marks faults on pages that were resident and released
	// (munmap, madvise DONTNEED/FREE/REMOVE, brk shrinking) since:
	// refault=yes, churn.
	RefaultLabel = "refault"
	// ViaMmap is the via label of a site that is the program's own mmap
	// call.
	ViaMmap = "mmap"
)

// Profile builds the pprof profile. Every ID is unique and non-zero;
// locations and functions are deduplicated.
func (b *Builder) Profile(stacks Stacks) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: SampleFaults, Unit: UnitCount},
			{Type: SampleAllocs, Unit: UnitCount},
			{Type: SampleAllocSpace, Unit: UnitBytes},
		},
		DefaultSampleType: SampleFaults,
		PeriodType:        &profile.ValueType{Type: SampleFaults, Unit: UnitCount},
		Period:            1,
	}
	if b.Res != nil {
		p.SampleType = append(p.SampleType, &profile.ValueType{Type: SampleResidentPeak, Unit: UnitBytes},
			&profile.ValueType{Type: SampleResidentEnd, Unit: UnitBytes},
			&profile.ValueType{Type: SampleUntouched, Unit: UnitBytes},
			&profile.ValueType{Type: SampleHuge, Unit: UnitBytes})
	}
	pb := NewLocations(p)
	cache := map[attribute.StackID][]*profile.Location{}
	resolve := func(id attribute.StackID, dropAlloc bool) []*profile.Location {
		if id == 0 {
			return nil
		}
		if locs, ok := cache[id]; ok && !dropAlloc {
			return locs
		}
		frames := stacks.Stack(id)
		if dropAlloc {
			frames = dropAllocator(frames)
		}
		locs := make([]*profile.Location, 0, len(frames))
		for i := range frames {
			locs = append(locs, pb.Location(&frames[i]))
		}
		if !dropAlloc {
			cache[id] = locs
		}
		return locs
	}
	allocCache := map[attribute.StackID][]*profile.Location{}
	allocStack := func(id attribute.StackID) []*profile.Location {
		if l, ok := allocCache[id]; ok {
			return l
		}
		l := resolve(id, true)
		allocCache[id] = l
		return l
	}
	type site struct {
		locs []*profile.Location
		via  string
	}
	siteCache := map[attribute.StackID]site{}
	siteStack := func(id attribute.StackID) site {
		if st, ok := siteCache[id]; ok {
			return st
		}
		var st site
		st.locs, st.via = pb.siteStack(allocStack(id))
		siteCache[id] = st
		return st
	}
	b.settle()
	for _, k := range b.order {
		v := b.agg[k]
		s := &profile.Sample{Value: []int64{v[0], v[1], v[2]}}
		if b.Res != nil {
			s.Value = append(s.Value, v[3], v[4], v[5], v[6])
		}
		via := ""
		switch {
		case k.class != "":
			s.Location = append([]*profile.Location{pb.classLocation(k.class)}, resolve(k.stack, false)...)
		case k.touch && b.TouchSites && !b.RawSites:
			locs := resolve(k.stack, false)
			s.Location, via = pb.userStack(locs, SiteFrames(locs))
		case k.touch:
			s.Location = resolve(k.stack, false)
		case b.RawSites:
			s.Location = allocStack(k.stack)
		default:
			st := siteStack(k.stack)
			s.Location = st.locs
			if st.via != "" {
				via = st.via
			}
		}
		s.Label = map[string][]string{}
		if k.mapped {
			via = ViaMmap
		}
		if via != "" {
			s.Label[ViaLabel] = []string{via}
		}
		if k.refault {
			s.Label[RefaultLabel] = []string{"yes"}
		}
		if names := k.flags.Names(); len(names) > 0 {
			s.Label[FlagLabel] = names
		}
		if k.comm != "" {
			s.Label[CommLabel] = []string{k.comm}
		}
		if k.thread != "" {
			s.Label[ThreadLabel] = []string{k.thread}
		}
		if k.access != attribute.AccessUnknown {
			s.Label[AccessLabel] = []string{k.access.String()}
		}
		if k.touch {
			s.Label[AllocSiteLabel] = []string{siteName(allocStack(k.allocSite), false)}
		}
		if k.class != "" {
			s.Label[ClassLabel] = []string{k.class}
		}
		if k.inAlloc {
			s.Label[InsideLabel] = []string{"allocator"}
		}
		if k.stackKind != "" {
			s.Label[StackLabel] = []string{k.stackKind}
		}
		p.Sample = append(p.Sample, s)
	}
	MainMappingFirst(p, func(s *profile.Sample) int64 { return s.Value[0] + s.Value[1] })
	return p
}

// MainMappingFirst moves the mapping that holds the leaf code of the most
// samples, each counted by weight, to the front and numbers the mappings
// again: pprof names a profile after its first mapping ("File:").
func MainMappingFirst(p *profile.Profile, weight func(*profile.Sample) int64) {
	total := map[*profile.Mapping]int64{}
	for _, s := range p.Sample {
		for _, l := range s.Location {
			if l.Mapping != nil {
				total[l.Mapping] += weight(s)
				break
			}
		}
	}
	best := 0
	for i, m := range p.Mapping {
		if total[m] > total[p.Mapping[best]] {
			best = i
		}
	}
	if best == 0 {
		return
	}
	m := p.Mapping[best]
	copy(p.Mapping[1:best+1], p.Mapping[:best])
	p.Mapping[0] = m
	for i, m := range p.Mapping {
		m.ID = uint64(i + 1)
	}
}

// dropAllocator removes the allocator's own frames from the leaf end.
func dropAllocator(frames []Location) []Location {
	for len(frames) > 1 {
		f := &frames[0]
		if len(f.Lines) == 0 {
			break
		}
		// The outermost line of the location is the real function; inlined
		// helpers inside malloc count as malloc.
		if !IsAllocator(f.Lines[len(f.Lines)-1].Function) && !IsAllocator(f.Lines[len(f.Lines)-1].SystemName) {
			break
		}
		frames = frames[1:]
	}
	return frames
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// SiteTotals is one allocation site's totals for the summary.
type SiteTotals struct {
	Name                 string
	Faults, Allocs, Size int64
	Flags                []string
}

// TopSites returns the n allocation sites with the most faults (ties by
// name), from a profile built in ByAlloc mode. Sites are named by their
// first frame in the user's own code (SampleSiteName); raw names them by
// their leaf.
func TopSites(p *profile.Profile, n int, raw bool) []SiteTotals {
	by := map[string]*SiteTotals{}
	flags := map[string]map[string]bool{}
	for _, s := range p.Sample {
		if len(s.Label[ClassLabel]) > 0 {
			continue
		}
		name := SampleSiteName(s, raw)
		t := by[name]
		if t == nil {
			t = &SiteTotals{Name: name}
			by[name] = t
			flags[name] = map[string]bool{}
		}
		t.Faults += s.Value[0]
		t.Allocs += s.Value[1]
		t.Size += s.Value[2]
		for _, f := range s.Label[FlagLabel] {
			flags[name][f] = true
		}
	}
	var out []SiteTotals
	for name, t := range by {
		for f := range flags[name] {
			t.Flags = append(t.Flags, f)
		}
		sort.Strings(t.Flags)
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Faults != out[j].Faults {
			return out[i].Faults > out[j].Faults
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// FormatBytes formats a byte count in IEC units, one decimal from 1 KiB on:
// "512 B", "1.5 KiB", "-2.0 MiB".
func FormatBytes(v int64) string {
	sign := ""
	u64 := uint64(v)
	if v < 0 {
		sign, u64 = "-", -uint64(v) // also right for MinInt64, whose -v overflows
	}
	if u64 < 1024 {
		return fmt.Sprintf("%s%d B", sign, u64)
	}
	f := float64(u64)
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u := -1
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	return fmt.Sprintf("%s%.1f %s", sign, f, units[u])
}
