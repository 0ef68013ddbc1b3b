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
	b := base.Copy()
	b.SetLabel(BaseLabel, []string{"true"})
	b.Scale(-1)
	p, err := profile.Merge([]*profile.Profile{new.Copy(), b})
	if err != nil {
		return nil, fmt.Errorf("merging BASE and NEW: %w", err)
	}
	return p, nil
}
