package diff

import (
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata/schema"
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

// Key says what makes two samples one site.
type Key string

// Site keys.
const (
	// KeySite keys a site by what survives an edit that keeps the
	// program's behaviour: the function of its site frame (the first frame
	// in the user's own code), the library function it went through (via),
	// and the allocation call's place among that function's calls, paired
	// between BASE and NEW by source order, not by file name or line
	// number (finishSiteKeys). Callers below the site frame are
	// left out: two stacks into one call are one site.
	KeySite Key = "site"
	// KeyLine keys a site by its whole stack from the site frame, each
	// frame with its line: a line moved by an unrelated edit makes a new
	// site.
	KeyLine Key = "line"
)

// Keys are the keys Options.Key accepts.
var Keys = []Key{KeySite, KeyLine}

// Options configures CompareBases.
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
	// Key says how sites are keyed; "" is KeySite.
	Key Key
	// RawSites keys and names sites by their whole stack and leaf frame
	// instead of from their first frame in the user's own code (Key is
	// then KeyLine's rule over the whole stack).
	RawSites bool
}

// Row is one quantity in both profiles.
type Row struct {
	Base, New int64
}

// delta is New-Base, saturated at the int64 limits: a crafted profile with
// values near ±2^63 must not wrap around and turn growth into shrinkage.
func (r Row) delta() int64 { return satSub(r.New, r.Base) }

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

// growth is delta relative to Base; +Inf when Base is zero and New is not,
// 0 when both are zero.
func (r Row) growth() float64 {
	switch {
	case r.Base != 0:
		return float64(r.delta()) / float64(r.Base)
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
	// StatusUnmatched: calls of one function whose BASE and NEW sides
	// could not be paired one to one, summed on each side.
	StatusUnmatched Status = "unmatched"
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
	// Key identifies the site across profiles (Options.Key), or its class.
	Key string
	// Name is the site for people, as NEW has it (BASE's when it vanished):
	// the site frame with file:line, the library function it went through
	// and up to two callers, or the class.
	Name string
	// Class is set for unattributed faults ("[stack]", "[file] libc.so.6").
	Class string
	// Frames is one of the site's stacks (NEW's when it has one), leaf (the
	// site frame) first, inlined frames expanded; nil for a class.
	Frames []Frame
	// Row's Base is the baselines' mean (rounded) when there are several.
	Row
	// Noise is the spread of the site's value over the baselines (largest
	// minus smallest; 0 with one): its noise floor.
	Noise  int64
	Status Status
	// Regressed: grew by more than the threshold, by at least MinDelta and
	// by more than Noise.
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
	// Key is how sites were keyed (KeySite, KeyLine; "raw" for RawSites).
	Key Key
	// Bases is how many baselines BASE stands for: with more than one,
	// every BASE value is their mean, and each site's spread over them is
	// its noise floor (Site.Noise).
	Bases int
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
	// Unmatched counts the sites with StatusUnmatched.
	Unmatched int
	// UngatedClasses counts the unattributed classes that grew past the
	// threshold but do not fail the comparison (Options.GateClasses off).
	UngatedClasses int
	// Losses lists the allocation and fault events either input lost
	// samples of (BASE first), as its profile's comments say.
	Losses []Loss
}

// Regressed reports whether any site regressed.
func (r *Result) Regressed() bool { return r.Regressions > 0 }

// compareOne compares NEW against BASE in opts.Metric.
func compareOne(base, new *profile.Profile, opts Options) (*Result, error) {
	return CompareBases([]*profile.Profile{base}, new, opts)
}

// multiRow is one quantity in every baseline and in NEW.
type multiRow struct {
	base []int64
	new  int64
}

// row is the baselines' mean (rounded half away from zero) and NEW, and
// the baselines' spread.
func (m *multiRow) row() (Row, int64) {
	var sum, lo, hi int64
	for i, v := range m.base {
		sum = satAdd(sum, v)
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	n := int64(len(m.base))
	mean := sum / n
	if rem := sum % n; 2*abs(rem) >= n {
		if sum > 0 {
			mean++
		} else {
			mean--
		}
	}
	return Row{Base: mean, New: m.new}, satSub(hi, lo)
}

// allZeroBase reports whether every baseline is zero.
func (m *multiRow) allZeroBase() bool {
	for _, v := range m.base {
		if v != 0 {
			return false
		}
	}
	return true
}

// CompareBases compares NEW against one or more baselines (runs of the
// same BASE program): every BASE value is the baselines' mean, and a site
// fails only when it also grew by more than its spread over the baselines,
// so a site that varies from run to run by itself cannot fail.
func CompareBases(bases []*profile.Profile, new *profile.Profile, opts Options) (*Result, error) {
	if len(bases) == 0 {
		return nil, fmt.Errorf("no BASE profile")
	}
	if opts.Metric == "" {
		opts.Metric = report.SampleFaults
	}
	if opts.Key == "" {
		opts.Key = KeySite
	}
	if !slices.Contains(Keys, opts.Key) {
		return nil, fmt.Errorf("unknown site key %q (want site or line)", opts.Key)
	}
	n := len(bases)
	all := append(slices.Clip(bases), new)
	idx, unit, err := metricIndexes(all, opts.Metric)
	if err != nil {
		return nil, err
	}
	r := &Result{Metric: opts.Metric, Unit: unit, Threshold: opts.Threshold, MinDelta: opts.MinDelta, Key: opts.Key, Bases: n}
	if opts.RawSites {
		r.Key = "raw"
	}
	for i, b := range bases {
		r.Losses = append(r.Losses, inputLosses(baseName(i, n), b)...)
	}
	r.Losses = append(r.Losses, inputLosses("NEW", new)...)

	sites := make([][]Site, n+1)
	for i, p := range all {
		sites[i] = profileSites(p, opts)
	}
	id := finishSiteKeys(sites[:n], sites[n])
	t := newTally(n)
	for i, p := range all {
		t.add(i, p, idx[i], sites[i])
	}
	t.finish(r, opts, id)
	return r, nil
}

// metricIndexes returns the index of metric in each profile's sample
// types, and its unit, which must be the same in every profile.
func metricIndexes(all []*profile.Profile, metric string) ([]int, string, error) {
	n := len(all) - 1
	name := func(i int) string {
		if i == n {
			return "NEW"
		}
		return baseName(i, n)
	}
	idx := make([]int, len(all))
	var unit string
	for i, p := range all {
		var err error
		var u string
		if idx[i], u, err = metricIndex(p, metric); err != nil {
			return nil, "", fmt.Errorf("%s: %w", name(i), err)
		}
		switch {
		case i == 0:
			unit = u
		case u != unit:
			// Counts and bytes (faults/count against faults/bytes) are
			// not comparable.
			return nil, "", fmt.Errorf("%s measures %s in %q, %s in %q: the numbers are not comparable; compare profiles written the same way", name(0), metric, unit, name(i), u)
		}
	}
	return idx, unit, nil
}

// tally sums one metric per site, per flag and in total, for every
// baseline and NEW.
type tally struct {
	n             int // baselines
	total, unattr *multiRow
	sites         map[string]*Site
	siteRows      map[string]*multiRow
	flags         map[string]*multiRow
}

func newTally(n int) *tally {
	return &tally{n: n, total: &multiRow{base: make([]int64, n)}, unattr: &multiRow{base: make([]int64, n)},
		sites: map[string]*Site{}, siteRows: map[string]*multiRow{}, flags: map[string]*multiRow{}}
}

func (t *tally) newRow() *multiRow { return &multiRow{base: make([]int64, t.n)} }

// add adds profile i's samples (i == n is NEW), metric at value index vi,
// ss being their sites.
func (t *tally) add(i int, p *profile.Profile, vi int, ss []Site) {
	pick := func(m *multiRow) *int64 {
		if i == t.n {
			return &m.new
		}
		return &m.base[i]
	}
	for j, s := range p.Sample {
		if vi >= len(s.Value) {
			continue
		}
		v := s.Value[vi]
		add := func(p *int64) { *p = satAdd(*p, v) }
		add(pick(t.total))
		site := ss[j]
		if site.Class != "" {
			add(pick(t.unattr))
		}
		for _, f := range s.Label[report.FlagLabel] {
			fr := t.flags[f]
			if fr == nil {
				fr = t.newRow()
				t.flags[f] = fr
			}
			add(pick(fr))
		}
		st := t.sites[site.Key]
		if st == nil {
			st = &site
			t.sites[site.Key] = st
			t.siteRows[site.Key] = t.newRow()
		} else if i == t.n && t.siteRows[site.Key].new == 0 && v != 0 {
			// Name the site as NEW has it: NEW's lines are the code
			// under review.
			st.Name, st.Frames = site.Name, site.Frames
		}
		add(pick(t.siteRows[site.Key]))
	}
}

// finish fills r's rows, flags and sites from the tally.
func (t *tally) finish(r *Result, opts Options, id siteIdentity) {
	r.Total, _ = t.total.row()
	r.Unattributed, _ = t.unattr.row()
	for f, m := range t.flags {
		row, _ := m.row()
		if m.allZeroBase() && row.New == 0 {
			continue // a flag only on samples with none of this metric
		}
		r.Flags = append(r.Flags, FlagRow{Flag: clipLabel(f), Row: row})
	}
	sort.Slice(r.Flags, func(i, j int) bool { return r.Flags[i].Flag < r.Flags[j].Flag })

	for k, s := range t.sites {
		m := t.siteRows[k]
		if m.allZeroBase() && m.new == 0 {
			continue
		}
		s.Row, s.Noise = m.row()
		s.Status = status(m, s.Row)
		if calls, ok := id.unmatched[k]; ok {
			s.Status = StatusUnmatched
			s.Name = unmatchedSiteName(s, calls)
			r.Unmatched++
		}
		s.Regressed = regressed(s.Row, s.Noise, opts)
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
		if da, db := abs(a.delta()), abs(b.delta()); da != db {
			return da > db
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Key < b.Key
	})
}

// status says how a site changed.
func status(m *multiRow, row Row) Status {
	switch d := row.delta(); {
	case m.allZeroBase():
		return StatusNew
	case row.New == 0:
		return StatusVanished
	case d > 0:
		return StatusGrew
	case d < 0:
		return StatusShrank
	}
	return StatusSame
}

// unmatchedSiteName names an unmatched site: its function, the library
// function it went through, and the calls it holds.
func unmatchedSiteName(s *Site, calls string) string {
	name := "[no stack]"
	if len(s.Frames) > 0 {
		name = s.Frames[0].Function
	}
	if _, via, ok := strings.Cut(strings.TrimPrefix(s.Key, siteKeyPrefix), "\x01"); ok {
		via = strings.TrimSuffix(via, unmatchedSuffix)
		if via != "" {
			name += " (via " + via + ")"
		}
	}
	return name + " " + calls
}

// baseName names baseline i of n in messages: "BASE", or "BASE2" for the
// second of several.
func baseName(i, n int) string {
	if n == 1 {
		return "BASE"
	}
	return fmt.Sprintf("BASE%d", i+1)
}

// regressed: a site fails when it grew by at least MinDelta, by more than
// its noise floor and by more than Threshold of its base; a new site has
// grown infinitely.
func regressed(r Row, noise int64, opts Options) bool {
	d := r.delta()
	if d <= 0 || d < opts.MinDelta || d <= noise {
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
		if m.File != "" && !strings.HasPrefix(m.File, "[") && !schema.IsSystemFile(m.File) {
			return path.Base(m.File)
		}
	}
	return ""
}

// mainClassKey keys the class of faults on the program's own file, so a
// renamed binary stays one row.
const mainClassKey = "class\x00[file] (main executable)"

// profileSites returns the site of each of p's samples, with Row zero. A
// site is keyed and named from its site frame, its first frame in the
// user's own code: the standard library's frames below it (which change
// with the library's version and inlining) are left out, and the name says
// which library function the code went through — from the sample's via
// label where the profile's leaf is already the site frame
// (report.ViaLabel), else from the frames skipped. opts.Key says what else
// the key holds; RawSites keys by the whole stack and names by the leaf.
// KeySite's keys are the group (function, via) until finishSiteKeys adds
// the call.
func profileSites(p *profile.Profile, opts Options) []Site {
	main := mainExecutable(p)
	out := make([]Site, len(p.Sample))
	for j, s := range p.Sample {
		out[j] = siteOf(s, main, opts)
	}
	return out
}

// siteKeyPrefix starts the keys of KeySite's sites.
const siteKeyPrefix = "site\x00"

// siteOf returns the site a sample belongs to, with Row zero. Its Key is
// the whole stack from the site frame (KeyLine; the whole stack with
// RawSites), or the site frame's function and via, to which
// finishSiteKeys adds the call (KeySite).
func siteOf(s *profile.Sample, main string, opts Options) Site {
	raw := opts.RawSites
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
		if v := s.Label[report.ViaLabel]; i == 0 && len(v) > 0 {
			via = v[0]
		}
	}
	site := Site{Name: siteName(frames, via), Frames: frames}
	var b strings.Builder
	if !raw && len(frames) > 0 && opts.Key != KeyLine {
		// The group: finishSiteKeys adds the call (file and line).
		fmt.Fprintf(&b, "%s%s\x01%s", siteKeyPrefix, frames[0].Function, via)
		site.Key = b.String()
		return site
	}
	b.WriteString("stack")
	for _, f := range frames {
		fmt.Fprintf(&b, "\x00%s\x01%s\x01%d", f.Function, f.File, f.Line)
	}
	site.Key = b.String()
	return site
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
