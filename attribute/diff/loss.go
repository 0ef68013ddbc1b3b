package diff

import (
	"fmt"

	"github.com/faultline/faultline/attribute/report"
	"github.com/google/pprof/profile"
)

// Loss is one input's lost samples of an allocation or fault event, from
// the loss comments faultline analyze writes into every profile
// (report.LossComment). Where such events were lost the input's attribution
// is incomplete, and a difference may be the loss, not the program.
type Loss struct {
	Input         string // "BASE" or "NEW"
	Event, Role   string
	Samples, Lost uint64
}

// Percent is the share of the event's samples that were lost.
func (l Loss) Percent() float64 {
	if l.Samples+l.Lost == 0 {
		return 0
	}
	return 100 * float64(l.Lost) / float64(l.Samples+l.Lost)
}

func (l Loss) String() string {
	return fmt.Sprintf("%s lost %d of %d %s samples (%.1f%%, %s): its attribution is incomplete",
		l.Input, l.Lost, l.Lost+l.Samples, l.Event, l.Percent(), l.Role)
}

// lossRoles are the event roles whose losses make attribution incomplete;
// stack samples' losses only make stacks inferred.
var lossRoles = map[string]bool{"alloc-entry": true, "alloc-return": true, "free": true, "fault": true}

func inputLosses(input string, p *profile.Profile) []Loss {
	var out []Loss
	for _, e := range report.RecordingLosses(p.Comments) {
		if e.Lost > 0 && lossRoles[e.Role] {
			out = append(out, Loss{Input: input, Event: e.Name, Role: e.Role, Samples: e.Samples, Lost: e.Lost})
		}
	}
	return out
}

// MaxLossPercent is the largest Loss.Percent of r.Losses (0 without any).
func (r *Result) MaxLossPercent() float64 {
	m := 0.0
	for _, l := range r.Losses {
		m = max(m, l.Percent())
	}
	return m
}
