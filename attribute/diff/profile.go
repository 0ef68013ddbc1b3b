package diff

import (
	"fmt"

	"github.com/google/pprof/profile"
)

// BaseLabel marks BASE's samples in a diff profile. It is the label
// `go tool pprof -diff_base` adds (internal/driver/fetch.go: fetchProfiles
// sets pprof::base=true on the base, scales it by -1 and merges), so pprof
// renders our diff profile the way it renders its own: NEW's values with
// BASE's subtracted, and percentages relative to BASE.
const BaseLabel = "pprof::base"

// Profile returns a diff profile: NEW's samples plus BASE's samples negated
// and labelled pprof::base=true. `go tool pprof -top diff.pb.gz` then shows
// each function's change. The inputs are not modified.
func Profile(base, new *profile.Profile) (*profile.Profile, error) {
	return ProfileBases([]*profile.Profile{base}, new)
}

// ProfileBases is Profile against several baselines: BASE is their mean
// (merged and scaled by 1/n; pprof rounds each value).
func ProfileBases(bases []*profile.Profile, new *profile.Profile) (*profile.Profile, error) {
	if len(bases) == 0 {
		return nil, fmt.Errorf("no BASE profile")
	}
	b := bases[0].Copy()
	if len(bases) > 1 {
		cp := make([]*profile.Profile, len(bases))
		for i, p := range bases {
			cp[i] = p.Copy()
		}
		var err error
		if b, err = profile.Merge(cp); err != nil {
			return nil, fmt.Errorf("merging the baselines: %w", err)
		}
	}
	b.SetLabel(BaseLabel, []string{"true"})
	b.Scale(-1 / float64(len(bases)))
	p, err := profile.Merge([]*profile.Profile{new.Copy(), b})
	if err != nil {
		return nil, fmt.Errorf("merging BASE and NEW: %w", err)
	}
	return p, nil
}
