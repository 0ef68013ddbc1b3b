package analyze

import "github.com/faultline/faultline/attribute/report"

// noAllocatorNote says what a profile of a recording without allocator
// probes means: a Go program's recording (its runtime allocates without
// malloc), or any recording of faults with stacks alone.
const noAllocatorNote = "no allocator call recorded (a Go program allocates through its runtime, never malloc): each fault is attributed to the code that touched the page first (--by touch), and a site is the first frame in the program's own code, so the profile shows where memory was first touched, not where it was allocated"

// touchOnly makes a run of a recording with fault stacks but no allocator
// probe attribute every fault to the stack that touched it: with no
// allocation to join a fault to, the touching code is the one attribution
// the recording supports.
func (ru *run) touchOnly() {
	ru.opts.Mode = report.ByTouch
	ru.noAllocator = true
}
