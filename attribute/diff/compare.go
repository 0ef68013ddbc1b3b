package diff

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/faultline/faultline/attribute/report"
	"github.com/google/pprof/profile"
)

// Metrics are the sample types faultline profiles carry, in profile order.
var Metrics = []string{report.SampleFaults, report.SampleAllocs, report.SampleAllocSpace}

// DefaultMinDelta is the absolute growth a site needs before it can count as
// a regression, per metric: 8 faults or allocations (a few pages' worth of
// noise from THP, ASLR and loader timing does not fail a build), 64 KiB of
// allocated space.
func DefaultMinDelta(metric string) int64 {
	if metric == report.SampleAllocSpace {
		return 64 << 10
	}
	return 8
}

// Options configures Compare.
type Options struct {
	// Metric is the sample type compared: "faults", "allocs" or "alloc_space".
	Metric string
	// Threshold is the relative growth that fails a site: 0.1 fails a site
	// that grew by more than 10%.
	Threshold float64
	// MinDelta is the absolute growth a site needs before it can fail, so
	// tiny sites cannot trip the threshold.
	MinDelta int64
	// GateClasses lets unattributed classes ([heap], [file] libc.so.6)
	// fail the comparison too; by default they are reported but not gated:
	// nothing in the program's own code names them.
	GateClasses bool
	// RawSites keys and names sites by their whole stack and leaf frame
	// instead of from their first frame in the user's own code.
	RawSites bool
}

// Row is one quantity in both profiles.
type Row struct {
	Base, New int64
}

// Delta is New-Base, saturated at the int64 limits: a crafted profile with
// values near ±2^63 must not wrap around and turn growth into shrinkage.
func (r Row) Delta() int64 { return satSub(r.New, r.Base) }

// satAdd and satSub are a+b and a-b clamped to [MinInt64, MaxInt64].
func satAdd(a, b int64) int64 {
	c := a + b
	if (c > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return c
}

func satSub(a, b int64) int64 {
	if b == math.MinInt64 {
		if a >= 0 {
			return math.MaxInt64
		}
		return a - b // a < 0: a+2^63 fits
	}
	return satAdd(a, -b)
}

// Growth is Delta relative to Base; +Inf when Base is zero and New is not,
// 0 when both are zero.
func (r Row) Growth() float64 {
	switch {
	case r.Base != 0:
		return float64(r.Delta()) / float64(r.Base)
	case r.New == 0:
		return 0
	}
	return math.Inf(int(r.New))
}

// Status says how a site changed.
type Status string

// Site statuses.
const (
	StatusNew      Status = "new"      // absent (zero) in BASE
	StatusVanished Status = "vanished" // absent (zero) in NEW
	StatusGrew     Status = "grew"
	StatusShrank   Status = "shrank"
	StatusSame     Status = "same"
)

// Frame is one symbolized frame of a site's stack.
type Frame struct {
	Function string // demangled name, or "module+0xoffset" when unsymbolized
	File     string // source file base name; "" when unknown
	Line     int64  // 0 when unknown
}

func (f Frame) String() string {
	if f.File != "" && f.Line != 0 {
		return fmt.Sprintf("%s %s:%d", f.Function, f.File, f.Line)
	}
	return f.Function
}

// Site is one allocation site (or unattributed class) in the comparison.
type Site struct {
	// Key identifies the site across profiles: its frames, or its class.
	Key string
	// Name is the site for people: the leaf frame with file:line and up to
	// two callers, or the class.
	Name string
	// Class is set for unattributed faults ("[stack]", "[file] libc.so.6").
	Class string
	// Frames is the allocation's stack, leaf (the allocation's caller)
	// first, inlined frames expanded; nil for a class.
	Frames []Frame
	Row
	Status Status
	// Regressed: grew by more than the threshold and by at least MinDelta.
	Regressed bool
}

// FlagRow is the total of one flag label value.
type FlagRow struct {
	Flag string
	Row
}

// Result is a comparison of two profiles in one metric.
type Result struct {
	Metric    string
	Unit      string
	Threshold float64
	MinDelta  int64
	// Total is the whole profile; Unattributed the faults joined to no
	// allocation (every class together).
	Total, Unattributed Row
	// Flags holds one row per flag label value seen in either profile,
	// by name. A sample with several flags counts in each.
	Flags []FlagRow
	// Sites holds every site with a non-zero value in either profile,
	// largest absolute change first (ties by Name, then Key).
	Sites []Site
	// Regressions counts the sites with Regressed set.
	Regressions int
	// UngatedClasses counts the unattributed classes that grew past the
	// threshold but do not fail the comparison (Options.GateClasses off).
	UngatedClasses int
	// Losses lists the allocation and fault events either input lost
	// samples of (BASE first), as its profile's comments say.
	Losses []Loss
}

// Regressed reports whether any site regressed.
func (r *Result) Regressed() bool { return r.Regressions > 0 }

// Compare compares NEW against BASE in opts.Metric.
func Compare(base, new *profile.Profile, opts Options) (*Result, error) {
	if opts.Metric == "" {
		opts.Metric = report.SampleFaults
	}
	bi, unit, err := metricIndex(base, opts.Metric)
	if err != nil {
		return nil, fmt.Errorf("BASE: %w", err)
	}
	ni, newUnit, err := metricIndex(new, opts.Metric)
	if err != nil {
		return nil, fmt.Errorf("NEW: %w", err)
	}
	if unit != newUnit {
		return nil, fmt.Errorf("BASE measures %s in %q, NEW in %q: the numbers are not comparable; compare profiles written the same way", opts.Metric, unit, newUnit)
	}
	r := &Result{Metric: opts.Metric, Unit: unit, Threshold: opts.Threshold, MinDelta: opts.MinDelta}
	r.Losses = append(inputLosses("BASE", base), inputLosses("NEW", new)...)
	sites := map[string]*Site{}
	flags := map[string]*Row{}
	add := func(p *profile.Profile, idx int, pick func(*Row) *int64) {
		main := mainExecutable(p)
		for _, s := range p.Sample {
			if idx >= len(s.Value) {
				continue
			}
			v := s.Value[idx]
			add := func(p *int64) { *p = satAdd(*p, v) }
			add(pick(&r.Total))
			site := siteOf(s, main, opts.RawSites)
			if site.Class != "" {
				add(pick(&r.Unattributed))
			}
			for _, f := range s.Label[report.FlagLabel] {
				fr := flags[f]
				if fr == nil {
					fr = &Row{}
					flags[f] = fr
				}
				add(pick(fr))
			}
			t := sites[site.Key]
			if t == nil {
				t = &site
				sites[site.Key] = t
			}
			add(pick(&t.Row))
		}
	}
	add(base, bi, func(r *Row) *int64 { return &r.Base })
	add(new, ni, func(r *Row) *int64 { return &r.New })

	for f, row := range flags {
		if row.Base == 0 && row.New == 0 {
			continue // a flag only on samples with none of this metric
		}
		r.Flags = append(r.Flags, FlagRow{Flag: clipLabel(f), Row: *row})
	}
	sort.Slice(r.Flags, func(i, j int) bool { return r.Flags[i].Flag < r.Flags[j].Flag })

	for _, s := range sites {
		if s.Base == 0 && s.New == 0 {
			continue
		}
		switch d := s.Delta(); {
		case s.Base == 0:
			s.Status = StatusNew
		case s.New == 0:
			s.Status = StatusVanished
		case d > 0:
			s.Status = StatusGrew
		case d < 0:
			s.Status = StatusShrank
		default:
			s.Status = StatusSame
		}
		s.Regressed = regressed(s.Row, opts)
		if s.Regressed && s.Class != "" && !opts.GateClasses {
			s.Regressed = false
			r.UngatedClasses++
		}
		if s.Regressed {
			r.Regressions++
		}
		s.Name, s.Class = clipLabel(s.Name), clipLabel(s.Class)
		for i := range s.Frames {
			s.Frames[i].Function, s.Frames[i].File = clipLabel(s.Frames[i].Function), clipLabel(s.Frames[i].File)
		}
		r.Sites = append(r.Sites, *s)
	}
	sort.Slice(r.Sites, func(i, j int) bool {
		a, b := &r.Sites[i], &r.Sites[j]
		if da, db := abs(a.Delta()), abs(b.Delta()); da != db {
			return da > db
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Key < b.Key
	})
	return r, nil
}

// regressed: a site fails when it grew by at least MinDelta and by more
// than Threshold of its base; a new site has grown infinitely.
func regressed(r Row, opts Options) bool {
	d := r.Delta()
	if d <= 0 || d < opts.MinDelta {
		return false
	}
	return r.Base <= 0 || float64(d) > opts.Threshold*float64(r.Base)
}

func abs(v int64) int64 {
	if v < 0 {
		return satSub(0, v)
	}
	return v
}

// maxLabelWidth caps a name shown in the output (function, file, class,
// flag): a crafted profile's 50 MB label must not become hundreds of MB of
// report. Keys keep the full names, so sites are still told apart.
const maxLabelWidth = 512

// clipLabel cuts s to maxLabelWidth bytes, at a rune boundary, and says so.
func clipLabel(s string) string {
	if len(s) <= maxLabelWidth {
		return s
	}
	cut := maxLabelWidth
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…[%d bytes cut]", s[:cut], len(s)-cut)
}

func metricIndex(p *profile.Profile, metric string) (int, string, error) {
	var have []string
	for i, st := range p.SampleType {
		if st.Type == metric {
			return i, st.Unit, nil
		}
		have = append(have, st.Type)
	}
	return 0, "", fmt.Errorf("profile has no %q samples (it has: %s); is it a faultline profile?", metric, strings.Join(have, ", "))
}

// mainExecutable is the base name of the profile's program: its first
// mapping that is neither a system library nor a special one ([vdso]).
// pprof puts the main binary first, and faultline's profiles put the
// mapping holding most sites' code there.
func mainExecutable(p *profile.Profile) string {
	for _, m := range p.Mapping {
		if m.File != "" && !strings.HasPrefix(m.File, "[") && !report.IsSystemFile(m.File) {
			return path.Base(m.File)
		}
	}
	return ""
}

// mainClassKey keys the class of faults on the program's own file, so a
// renamed binary stays one row.
const mainClassKey = "class\x00[file] (main executable)"

// siteOf returns the site a sample belongs to, with Row zero. A site is
// keyed and named from its first frame in the user's own code: the
// standard library's frames below it (which change with the library's
// version and inlining) are left out of the key, and the name says which
// library function the code went through. raw keys by the whole stack and
// names by the leaf.
func siteOf(s *profile.Sample, main string, raw bool) Site {
	if c := s.Label[report.ClassLabel]; len(c) > 0 {
		if main != "" && c[0] == "[file] "+main {
			return Site{Key: mainClassKey, Name: c[0], Class: c[0]}
		}
		return Site{Key: "class\x00" + c[0], Name: c[0], Class: c[0]}
	}
	var frames []Frame
	for _, loc := range s.Location {
		frames = append(frames, locationFrames(loc)...)
	}
	via := ""
	if !raw {
		// locationFrames and report.SiteFrames expand alike.
		var i int
		i, via = report.UserFrame(report.SiteFrames(s.Location))
		frames = frames[i:]
	}
	var key strings.Builder
	key.WriteString("stack")
	for _, f := range frames {
		fmt.Fprintf(&key, "\x00%s\x01%s\x01%d", f.Function, f.File, f.Line)
	}
	return Site{Key: key.String(), Name: siteName(frames, via), Frames: frames}
}

// locationFrames expands a location into frames, innermost inlined first as
// pprof stores them. File names are reduced to their base name: two builds
// from different checkout directories must still match, and a base name
// together with the function and line does not collide in practice.
// Unsymbolized locations are named by module and file offset, which do not
// move with ASLR.
func locationFrames(loc *profile.Location) []Frame {
	if len(loc.Line) == 0 {
		name := fmt.Sprintf("%#x", loc.Address)
		if m := loc.Mapping; m != nil && m.File != "" && loc.Address >= m.Start {
			name = fmt.Sprintf("%s+%#x", path.Base(m.File), loc.Address-m.Start+m.Offset)
		}
		return []Frame{{Function: name}}
	}
	out := make([]Frame, 0, len(loc.Line))
	for _, ln := range loc.Line {
		f := Frame{Line: ln.Line, Function: "[unknown]"}
		if fn := ln.Function; fn != nil {
			if fn.Name != "" {
				f.Function = fn.Name
			} else if fn.SystemName != "" {
				f.Function = fn.SystemName
			}
			if fn.Filename != "" {
				f.File = path.Base(fn.Filename)
			}
		}
		out = append(out, f)
	}
	return out
}

// siteName is the site's frame with file:line, the library function it
// went through, and up to two callers.
func siteName(frames []Frame, via string) string {
	if len(frames) == 0 {
		return "[no stack]"
	}
	var b strings.Builder
	b.WriteString(frames[0].String())
	if via != "" {
		b.WriteString(" (via " + via + ")")
	}
	for i := 1; i < len(frames) && i < 3; i++ {
		b.WriteString(" ← ")
		b.WriteString(frames[i].Function)
	}
	return b.String()
}

// ParseThreshold parses a relative threshold: "10%" or "0.1" (both 10%).
// A bare number of 1 or more is refused as ambiguous ("10" could mean 10%
// or 1000%): write it with a percent sign.
func ParseThreshold(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	t = strings.TrimSuffix(t, "%")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("invalid threshold %q: want a percentage such as 10%% or a fraction such as 0.1", s)
	}
	if pct {
		return v / 100, nil
	}
	if v >= 1 {
		return 0, fmt.Errorf("ambiguous threshold %q: write %s%% for %s percent, or %s%% for %s times the base", s, t, t, strconv.FormatFloat(v*100, 'f', -1, 64), t)
	}
	return v, nil
}
