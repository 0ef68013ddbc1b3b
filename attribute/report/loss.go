package report

import (
	"fmt"
	"strings"
)

// A profile carries its recording's losses as pprof comments (Profile.
// Comments, shown by `go tool pprof -comments`), one per event that has
// samples or losses (not the probes of functions never called), so that
// `faultline diff` can warn about an input that lost allocation or fault
// events without the recording at hand. A comment reads
//
//	faultline: event fl:malloc (alloc-entry): 110022 samples, 0 lost
//
// Lost counts the event's PERF_RECORD_LOST_SAMPLES, as `perf report
// --stats` and `faultline info` do. Comments are free text to pprof: it
// keeps them through merges and prints them as they are.

// EventLoss is one event's samples and losses in a recording.
type EventLoss struct {
	Name, Role    string
	Samples, Lost uint64
}

const lossPrefix = "faultline: event "

// LossComment renders e as a profile comment.
func LossComment(e EventLoss) string {
	return fmt.Sprintf("%s%s (%s): %d samples, %d lost", lossPrefix, e.Name, e.Role, e.Samples, e.Lost)
}

// ParseLossComment reads a comment LossComment wrote; ok is false for any
// other comment.
func ParseLossComment(c string) (e EventLoss, ok bool) {
	rest, ok := strings.CutPrefix(c, lossPrefix)
	if !ok {
		return e, false
	}
	// The name may hold anything but ends at the last " (".
	i := strings.LastIndex(rest, " (")
	j := strings.LastIndex(rest, "): ")
	if i < 0 || j < i {
		return e, false
	}
	e.Name, e.Role = rest[:i], rest[i+2:j]
	if n, err := fmt.Sscanf(rest[j+3:], "%d samples, %d lost", &e.Samples, &e.Lost); n != 2 || err != nil {
		return EventLoss{}, false
	}
	return e, true
}

// RecordingLosses returns the losses a profile's comments report.
func RecordingLosses(comments []string) []EventLoss {
	var out []EventLoss
	for _, c := range comments {
		if e, ok := ParseLossComment(c); ok {
			out = append(out, e)
		}
	}
	return out
}
