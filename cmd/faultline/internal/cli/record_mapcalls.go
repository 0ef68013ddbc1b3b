package cli

import (
	"fmt"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// mapCallEvents reads the memory-map calls' syscall tracepoints
// (schema.SyscallEvents) from tracefs: their ids and formats. Without
// them (--no-map-calls, no tracefs, a kernel without
// CONFIG_FTRACE_SYSCALLS) the recording goes on without, and a note says
// what that costs.
func (r *recorder) mapCallEvents() []rec.Probe {
	if r.opts.noMapCalls {
		return nil
	}
	out, mounted, err := rec.MapCallProbes(r.sys)
	if mounted != "" {
		r.logf("mounted tracefs at %s (left mounted)", mounted)
	}
	if err != nil {
		r.notes.add(fmt.Errorf("the memory-map calls are not recorded: %w; releases, re-faults and the program's own mappings are not seen", err))
		return nil
	}
	return out
}
