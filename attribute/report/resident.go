package report

import (
	"cmp"
	"slices"

	"github.com/google/pprof/profile"
)

// SiteValue is one site's total of one sample type.
type SiteValue struct {
	Name  string
	Value int64
}

// ValueIndex returns the index of sample type typ in p, or -1.
func ValueIndex(p *profile.Profile, typ string) int {
	for i, st := range p.SampleType {
		if st.Type == typ {
			return i
		}
	}
	return -1
}

// SampleName names a sample's site as the summary does: an unattributed
// fault's class ("[anon]", "[stack]", …), else its site (SampleSiteName).
func SampleName(s *profile.Sample, raw bool) string {
	if c := s.Label[ClassLabel]; len(c) > 0 {
		return c[0]
	}
	return SampleSiteName(s, raw)
}

// TopBy returns the n sites (SampleName) with the largest total of sample
// type typ among the samples keep accepts (nil: all), largest first, ties
// by name; zero totals are left out.
func TopBy(p *profile.Profile, typ string, n int, raw bool, keep func(*profile.Sample) bool) []SiteValue {
	vi := ValueIndex(p, typ)
	if vi < 0 {
		return nil
	}
	by := map[string]int64{}
	for _, s := range p.Sample {
		if vi < len(s.Value) && s.Value[vi] != 0 && (keep == nil || keep(s)) {
			by[SampleName(s, raw)] += s.Value[vi]
		}
	}
	out := make([]SiteValue, 0, len(by))
	for name, v := range by {
		out = append(out, SiteValue{name, v})
	}
	slices.SortFunc(out, func(a, b SiteValue) int { return cmp.Or(cmp.Compare(b.Value, a.Value), cmp.Compare(a.Name, b.Name)) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// IsRefault reports whether a sample is of faults on released pages.
func IsRefault(s *profile.Sample) bool { return len(s.Label[RefaultLabel]) > 0 }
