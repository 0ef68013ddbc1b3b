package report

import (
	"slices"

	"github.com/faultline/faultline/attribute"
	"github.com/google/pprof/profile"
)

// NewWindow returns a builder for one window of b's recording: b's labels
// (Mode, CommOf, ThreadOf, StackKind, RawSites, TouchSites), counts of its
// own. The caller gives it the window's allocations and faults as they
// reach b, and WindowProfile makes its profile.
func (b *Builder) NewWindow() *Builder {
	w := NewBuilder(b.Mode, b.CommOf)
	w.ThreadOf, w.StackKind, w.RawSites, w.TouchSites = b.ThreadOf, b.StackKind, b.RawSites, b.TouchSites
	return w
}

// Samples is how many samples b has counted so far.
func (b *Builder) Samples() int { return len(b.order) }

// WindowProfile builds the profile of window w of b's recording, its
// callers inferred as Infer does: faults, allocs and alloc_space as w
// counted them, and resident_end the anonymous memory b's Res holds now
// (the window's end) per site, the pages of every allocation live or not,
// made resident in this window or before. Call it once per window, before
// b's own Infer or Profile; w is spent.
func (w *Builder) WindowProfile(b *Builder, callers func(leaf attribute.StackID, comm string) []Weighted, stacks Stacks) *profile.Profile {
	if b.Res != nil && !b.settled {
		first := w.firstOfOwners()
		for o, rk := range b.ownerKs {
			pages := b.Res.Current(o)
			if pages == 0 {
				continue
			}
			i, ok := first[rk]
			if !ok {
				i = w.add(sampleKey{stack: rk.stack, class: rk.class, mapped: rk.mapped, comm: rk.comm}, 0, 0, 0)
				first[rk] = i
			}
			w.agg[w.order[i]][4] += pages * attribute.PageSize
		}
		// Profile writes the resident columns for a builder with Res;
		// w has no owners of its own, so settling moves nothing.
		w.Res = b.Res
	}
	w.Infer(callers)
	p := w.Profile(stacks)
	keepSampleTypes(p, SampleFaults, SampleAllocs, SampleAllocSpace, SampleResidentEnd)
	return p
}

// keepSampleTypes drops every sample type of p but those named, and the
// samples left with no value.
func keepSampleTypes(p *profile.Profile, names ...string) {
	var keep []int
	var types []*profile.ValueType
	for i, st := range p.SampleType {
		if slices.Contains(names, st.Type) {
			keep = append(keep, i)
			types = append(types, st)
		}
	}
	p.SampleType = types
	samples := p.Sample[:0]
	for _, s := range p.Sample {
		v := make([]int64, len(keep))
		zero := true
		for j, i := range keep {
			v[j] = s.Value[i]
			zero = zero && v[j] == 0
		}
		if !zero {
			s.Value = v
			samples = append(samples, s)
		}
	}
	p.Sample = samples
}
