package recorder

import "github.com/faultline/faultline/perfdata"

// Source is where a recording's allocator calls come from: *UprobeSource (the
// kernel's uprobes on the allocator's entry points, which the caller added
// to tracefs) or *InProcessSource (a shim preloaded into the command, writing
// the calls into shared-memory rings). Each is a file of this package; the
// session around them opens the kernel's events (page faults, the
// memory-map calls, the sideband), runs the command and writes the file.
type Source interface {
	// start readies the source for session s (which has its Config and
	// nothing opened yet).
	start(s *session) (source, error)
}

// source is a Source at work in one session.
type source interface {
	// traits are the source's fixed properties.
	traits() sourceTraits
	// events adds the source's events to l, after the range ring's owner,
	// page faults and the memory-map calls, before the page faults'
	// stack instance.
	events(l *specList)
	// tracingData is the recording's TRACING_DATA: the formats of the
	// source's events and of the memory-map calls (nil: none).
	tracingData() ([]byte, error)
	// drain writes what the kernel's rings and the source hold and
	// reports the bytes; final: recording stops, write everything.
	drain(final bool) (int, error)
	// wakeups returns a channel that receives when the source has records
	// to drain (nil: the kernel's rings wake the session), and the
	// function that stops it.
	wakeups() (<-chan struct{}, func())
	// close releases what start took.
	close()
}

// sourceTraits are a source's fixed properties.
type sourceTraits struct {
	method string // Result.Method
	// launcher starts the command (faultline itself when ""), with env
	// added to its environment.
	launcher string
	env      []string
	// clock: the kernel's events stamp with CLOCK_MONOTONIC, the clock
	// of the source's own records.
	clock bool
	// writer: the compression level and KeepUp (perfdata.WriterOptions).
	writer perfdata.WriterOptions
	// busyBytes: a drain that wrote more is repeated at once (0: only
	// the kernel's rings' fill decides).
	busyBytes int
	// ordered: a drain reads the clock, writes the queued snapshots,
	// and writes a kernel record only once it is older than that clock
	// reading less a margin (a watermark), so every snapshot comes ahead
	// of the kernel records stamped after it was queued
	// (snapshotter.prompt).
	ordered bool
}
