package report

import (
	"fmt"
	"strconv"
	"strings"
)

// A profile carries its recording's losses as one pprof comment (Profile.
// Comments, shown by `go tool pprof -comments` and atop every text view),
// naming each event that has samples or losses (not the probes of functions
// never called), so that `faultline diff` can warn about an input that lost
// allocation or fault events without the recording at hand. It reads
//
//	faultline: recording lost 0 of 228101 samples; per event (samples/lost): page-faults (fault) 3454/0; faultline_9424:malloc (alloc-entry) 114048/0
//
// Lost counts the event's PERF_RECORD_LOST_SAMPLES, as `perf report
// --stats` and `faultline info` do. An event name with a space or one of
// ;()/" is written as a Go string literal. Comments are free text to pprof:
// it keeps them through merges and prints them as they are. Profiles written
// before this line existed carry one comment per event instead
// ("faultline: event NAME (ROLE): N samples, M lost"); RecordingLosses reads
// both.

// EventLoss is one event's samples and losses in a recording.
type EventLoss struct {
	Name, Role    string
	Samples, Lost uint64
}

const (
	lossPrefix    = "faultline: recording lost "
	lossPerEvent  = " samples; per event (samples/lost): "
	oldLossPrefix = "faultline: event "
)

// LossComment renders the events' samples and losses as one profile
// comment; "" without events.
func LossComment(events []EventLoss) string {
	if len(events) == 0 {
		return ""
	}
	var samples, lost uint64
	for _, e := range events {
		samples += e.Samples
		lost += e.Lost
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s%d of %d%s", lossPrefix, lost, samples+lost, lossPerEvent)
	for i, e := range events {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s) %d/%d", lossName(e.Name), lossName(e.Role), e.Samples, e.Lost)
	}
	return b.String()
}

// lossName quotes a name the comment's punctuation could not delimit.
func lossName(s string) string {
	if s == "" || strings.ContainsAny(s, " ;()/\"\\") || strconv.Quote(s) != `"`+s+`"` {
		return strconv.Quote(s)
	}
	return s
}

// cutLossName reads a name lossName wrote, up to the byte end.
func cutLossName(s string, end byte) (name, rest string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return "", "", false
		}
		name, _ = strconv.Unquote(q)
		return name, s[len(q):], true
	}
	i := strings.IndexByte(s, end)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i:], true
}

// parseLossComment reads a comment LossComment wrote (or one per-event
// comment of an older profile); ok is false for any other comment.
func parseLossComment(c string) (events []EventLoss, ok bool) {
	if e, ok := parseOldLossComment(c); ok {
		return []EventLoss{e}, true
	}
	rest, ok := strings.CutPrefix(c, lossPrefix)
	if !ok {
		return nil, false
	}
	i := strings.Index(rest, lossPerEvent)
	if i < 0 {
		return nil, false
	}
	rest = rest[i+len(lossPerEvent):]
	for rest != "" {
		var e EventLoss
		var ok bool
		if e.Name, rest, ok = cutLossName(rest, ' '); !ok {
			return nil, false
		}
		if rest, ok = strings.CutPrefix(rest, " ("); !ok {
			return nil, false
		}
		if e.Role, rest, ok = cutLossName(rest, ')'); !ok {
			return nil, false
		}
		if rest, ok = strings.CutPrefix(rest, ") "); !ok {
			return nil, false
		}
		entry, next, more := strings.Cut(rest, "; ")
		s, l, found := strings.Cut(entry, "/")
		var err1, err2 error
		e.Samples, err1 = strconv.ParseUint(s, 10, 64)
		e.Lost, err2 = strconv.ParseUint(l, 10, 64)
		if !found || err1 != nil || err2 != nil {
			return nil, false
		}
		events = append(events, e)
		rest = next
		if more && rest == "" {
			return nil, false
		}
	}
	return events, true
}

// parseOldLossComment reads one event's comment of a profile written before
// LossComment put all events on one line.
func parseOldLossComment(c string) (e EventLoss, ok bool) {
	rest, ok := strings.CutPrefix(c, oldLossPrefix)
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
		if es, ok := parseLossComment(c); ok {
			out = append(out, es...)
		}
	}
	return out
}
