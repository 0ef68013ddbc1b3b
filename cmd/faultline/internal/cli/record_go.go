package cli

import (
	"fmt"

	"github.com/faultline/faultline/cmd/faultline/internal/libc"
	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// goNote says in one line what recording a Go program gives.
const goNote = "%s is a Go program: its allocations are the Go runtime's, which never calls malloc; recording its page faults and the runtime's memory-map calls: analyze attributes each fault to the program's code that touched the page (a Go profile shows where memory was first touched, not where it was allocated)"

// allocatorProbes returns the object whose allocator record probes, and
// the probes. A Go program that defines no malloc (built without cgo) has
// no allocator to probe: lib is "" and there are no probes; the recording
// holds its page faults and memory-map calls.
func (r *recorder) allocatorProbes(cmdPath string) (lib string, probes []rec.UprobeDef, err error) {
	lib, err = r.findLibc(cmdPath)
	if err != nil {
		prog := cmdPath
		if r.opts.pid > 0 {
			prog = fmt.Sprintf("/proc/%d/exe", r.opts.pid)
		}
		if prog != "" && r.opts.libc == "" && libc.IsGoProgram(r.sys, prog) {
			if r.opts.pid > 0 {
				prog = fmt.Sprintf("process %d", r.opts.pid)
			}
			r.logf(goNote, prog)
			// Every fault's stack names the code that touched it: the
			// only attribution there is, so every fault gets one unless
			// --stack-every says otherwise.
			r.opts.faultStacks = true
			if r.opts.stackEvery == defaultStackEvery {
				r.opts.stackEvery = 1
			}
			// A stack per fault, in the faults' ring: four times its
			// pages, as each fault's stack is 8 KiB where its sample is
			// a few words.
			if !r.opts.mmapPagesSet {
				r.opts.mmapPages *= 4
			}
			return "", nil, nil
		}
		return "", nil, err
	}
	probes, notes, err := rec.UprobeDefinitions(r.sys, lib, r.group, r.opts.probes)
	if err != nil {
		return "", nil, prereqError("%v", err)
	}
	r.notes.add(notes...)
	return lib, probes, nil
}
