package schema

// SnapshotEvent names faultline record's synthetic event
// faultline:resident: a snapshot of one process's resident anonymous
// memory, read from its page tables while it runs (SnapshotPeriodic) or as
// it exits (SnapshotExit). A snapshot too large for one record spans
// several with one time, each covering [lo, hi) of the address space.
// Fields (SnapshotFields, u64 each): pid; kind; begin, the recording's
// time when the read began (the sample's time is when it ended); lo and
// hi; hwm and anon, the process's peak RSS (VmHWM) and anonymous RSS
// (RssAnon) in bytes then (0: not read); then SnapshotRanges, a
// __data_loc u64[] of (start, end, flags) triples, flags the Snap* bits.
const SnapshotEvent = "resident"

// The kinds of snapshot.
const (
	SnapshotPeriodic = 0
	SnapshotExit     = 1
)

// The flags of a snapshot range.
const (
	SnapPresent = 1 << 0
	SnapSwapped = 1 << 1
	SnapHuge    = 1 << 2
)

// SnapshotFields are faultline:resident's scalar fields, in order.
var SnapshotFields = []string{"pid", "kind", "begin", "lo", "hi", "hwm", "anon"}

// SnapshotRanges is the name of faultline:resident's ranges field.
const SnapshotRanges = "ranges"

// SnapshotMaxRanges bounds the ranges of one record: its u16 size (and
// the __data_loc's u16 length) must hold them.
const SnapshotMaxRanges = 2048
