package diff

import (
	"fmt"
	"strings"

	"github.com/google/pprof/profile"
)

// baseLabel marks BASE's samples in a diff profile. It is the label
// `go tool pprof -diff_base` adds (internal/driver/fetch.go: fetchProfiles
// sets pprof::base=true on the base, scales it by -1 and merges), so pprof
// renders our diff profile the way it renders its own: NEW's values with
// BASE's subtracted, and percentages relative to BASE.
const baseLabel = "pprof::base"

// profileOne is ProfileBases against one baseline.
func profileOne(base, new *profile.Profile) (*profile.Profile, error) {
	return ProfileBases([]*profile.Profile{base}, new)
}

// ProfileBases returns a diff profile: NEW's samples plus BASE's samples
// negated and labelled pprof::base=true, where BASE is the mean of bases
// (merged and scaled by 1/n; pprof rounds each value). `go tool pprof -top
// diff.pb.gz` then shows each function's change. It consumes its inputs:
// bases and new are modified (not copied: two copies of profiles with
// hundreds of thousands of sites cost hundreds of MiB).
// pprof merges only profiles of the same sample types: when BASE and NEW
// have different sets, both are cut to the types they share (BASE's order).
func ProfileBases(bases []*profile.Profile, new *profile.Profile) (*profile.Profile, error) {
	if len(bases) == 0 {
		return nil, fmt.Errorf("no BASE profile")
	}
	b, n := bases[0], new
	if len(bases) > 1 {
		var err error
		if b, err = profile.Merge(bases); err != nil {
			return nil, fmt.Errorf("merging the baselines: %w", err)
		}
	}
	if !sameTypes(b.SampleType, n.SampleType) {
		var common []*profile.ValueType
		for _, t := range b.SampleType {
			if typeIndex(n.SampleType, t) >= 0 {
				common = append(common, t)
			}
		}
		if len(common) == 0 {
			return nil, fmt.Errorf("BASE's sample types (%s) and NEW's (%s) have none in common: no diff profile can hold both", typeNames(b.SampleType), typeNames(n.SampleType))
		}
		project(b, common)
		project(n, common)
	}
	b.SetLabel(baseLabel, []string{"true"})
	b.Scale(-1 / float64(len(bases)))
	// NEW's tables and samples followed by BASE's, its IDs moved past
	// NEW's: what profile.Merge gives without deduplicating, which costs
	// its keys and maps per location and function (1.4 GB for two
	// profiles of 330k sites). pprof's reports aggregate by name anyway.
	var maxM, maxL, maxF uint64
	for _, m := range n.Mapping {
		maxM = max(maxM, m.ID)
	}
	for _, l := range n.Location {
		maxL = max(maxL, l.ID)
	}
	for _, f := range n.Function {
		maxF = max(maxF, f.ID)
	}
	for _, m := range b.Mapping {
		m.ID += maxM
	}
	for _, l := range b.Location {
		l.ID += maxL
	}
	for _, f := range b.Function {
		f.ID += maxF
	}
	n.Mapping = append(n.Mapping, b.Mapping...)
	n.Location = append(n.Location, b.Location...)
	n.Function = append(n.Function, b.Function...)
	n.Sample = append(n.Sample, b.Sample...)
	if err := n.CheckValid(); err != nil {
		return nil, fmt.Errorf("joining BASE and NEW: %w", err)
	}
	return n, nil
}

func sameTypes(a, b []*profile.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if *a[i] != *b[i] {
			return false
		}
	}
	return true
}

// typeIndex returns the index of the sample type equal to t (type and
// unit), or -1.
func typeIndex(types []*profile.ValueType, t *profile.ValueType) int {
	for i, x := range types {
		if *x == *t {
			return i
		}
	}
	return -1
}

func typeNames(types []*profile.ValueType) string {
	var s []string
	for _, t := range types {
		s = append(s, t.Type+"/"+t.Unit)
	}
	return strings.Join(s, ", ")
}

// project keeps only the sample types of p in types, in that order.
func project(p *profile.Profile, types []*profile.ValueType) {
	idx := make([]int, len(types))
	for i, t := range types {
		idx[i] = typeIndex(p.SampleType, t)
	}
	for _, s := range p.Sample {
		v := make([]int64, len(idx))
		for i, k := range idx {
			if k < len(s.Value) {
				v[i] = s.Value[k]
			}
		}
		s.Value = v
	}
	p.SampleType = types
	for _, t := range types {
		if t.Type == p.DefaultSampleType {
			return
		}
	}
	p.DefaultSampleType = "" // pprof then shows the last type
}
