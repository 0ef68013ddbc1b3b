package analyze

import (
	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/google/pprof/profile"
)

// WindowOptions cuts a run into windows of the recording's time, a
// profile each, as the records pass: for a recording that streams for
// hours (faultline record --every), of which the run keeps only what
// lives on (allocations not yet freed, resident pages, the processes'
// maps and the stacks seen), not the events.
type WindowOptions struct {
	// Every is a window's length, in ns of the recording's clock.
	Every uint64
	// Start is the first window's start on that clock (0: the first
	// record's time).
	Start uint64
	// Span, when set, is how long the windows cover from the first one's
	// start: a recording run for a duration (the windows end with it, the
	// last one whole); records after it are read and not counted.
	Span uint64
	// Emit receives each window once the records pass its end, and the
	// last one (up to the last record) when the stream ends; an error
	// stops the run.
	Emit func(*Window) error
	// WindowsOnly leaves the faults and allocations out of the run's own
	// profile (Result.Profile; its resident memory stays): a run of hours
	// then keeps no counts across windows (they grow with every site and
	// thread label ever seen), only what the windows need.
	WindowsOnly bool
}

// Window is one window of a run.
type Window struct {
	Index      int    // 0, 1, ...
	Start, End uint64 // the recording's clock, ns
	// Profile has faults, allocs and alloc_space of the window (each
	// allocation counted in the window whose call made it, each fault in
	// the window it happened in) and resident_end, the anonymous memory
	// resident at the window's end per site, whenever it was allocated.
	Profile *profile.Profile
}

// windows is a run's state across windows.
type windows struct {
	opts       *WindowOptions
	b          *report.Builder // this window's counts (report.Builder.NewWindow)
	start, end uint64
	index      int
	last       uint64 // the latest record time seen
	until      uint64 // the end of the span (0: none)
	over       bool   // the span is over: the records left are not counted
	// exited holds the threads that ended in this window (and were not
	// named again since): their names are dropped once it is cut.
	exited map[uint32]bool
}

// windowRecords feeds every record to the run, serially, cutting a window
// whenever a record's time passes the current one's end.
func (ru *run) windowRecords() error {
	w := ru.win
	for ru.r.Next() {
		rec := ru.r.Record()
		if w.over {
			continue
		}
		if t := rec.Common().Time; t > 0 && ru.tr != nil {
			if w.end == 0 {
				w.start = w.opts.Start
				if w.start == 0 || w.start > t {
					w.start = t
				}
				w.end = w.start + w.opts.Every
				if w.opts.Span > 0 {
					w.until = w.start + w.opts.Span
				}
			}
			if w.until > 0 && t >= w.until {
				for !w.over {
					if err := ru.cutWindow(min(w.end, w.until)); err != nil {
						return err
					}
					w.over = w.start >= w.until
				}
				continue
			}
			for t >= w.end {
				if err := ru.cutWindow(w.end); err != nil {
					return err
				}
			}
			w.last = max(w.last, t)
		}
		if err := ru.handle(rec); err != nil {
			return err
		}
	}
	return nil
}

// cutWindow ends the current window at end and emits its profile.
func (ru *run) cutWindow(end uint64) error {
	w := ru.win
	ru.tr.ReportLive()
	var callers func(leaf attribute.StackID, comm string) []report.Weighted
	if ru.st.leafMode {
		callers = ru.st.weights
	}
	p := w.b.WindowProfile(ru.b, callers, report.NewSymbols(ru.sess))
	p.DurationNanos = int64(end - w.start)
	win := &Window{Index: w.index, Start: w.start, End: end, Profile: p}
	w.b = ru.b.NewWindow()
	// Nothing of an ended thread is left to report: every allocation
	// live was reported above, its calls in flight settled at its exit.
	for tid := range w.exited {
		delete(ru.threads, tid)
	}
	clear(w.exited)
	// What a burst grew the reader's buffers to goes back.
	ru.r.Trim()
	w.index++
	w.start, w.end = end, end+w.opts.Every
	return w.opts.Emit(win)
}

// finishWindows emits the last window, up to the last record, once the
// tracker is closed (what was in flight at the end is counted in it),
// when it has any length or anything counted.
func (ru *run) finishWindows() error {
	w := ru.win
	if w == nil || w.over || ru.tr == nil || w.end == 0 || w.last <= w.start && w.b.Samples() == 0 {
		return nil
	}
	return ru.cutWindow(max(w.last, w.start))
}
