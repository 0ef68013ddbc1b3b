package cli

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/faultline/faultline/attribute/analyze"
	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// mapCallEvents reads the memory-map calls' syscall tracepoints
// (analyze.SyscallEvents) from tracefs: their ids and formats. Without
// them (--no-map-calls, no tracefs, a kernel without
// CONFIG_FTRACE_SYSCALLS) the recording goes on without, and a note says
// what that costs.
func (r *recorder) mapCallEvents() []rec.Probe {
	if r.opts.noMapCalls {
		return nil
	}
	dir := ""
	for _, d := range tracefsDirs {
		if r.sys.Exists(filepath.Join(d, "events", rec.MapCallGroup, analyze.SyscallEvents[0], "id")) {
			dir = filepath.Join(d, "events", rec.MapCallGroup)
			break
		}
	}
	const cost = "releases, re-faults and the program's own mappings are not seen"
	if dir == "" {
		r.notes.add(fmt.Errorf("the memory-map calls are not recorded: no syscall tracepoints in tracefs (mount it: mount -t tracefs nodev /sys/kernel/tracing; the kernel needs CONFIG_FTRACE_SYSCALLS); %s", cost))
		return nil
	}
	var out []rec.Probe
	for _, name := range analyze.SyscallEvents {
		idText, err := r.sys.ReadFile(filepath.Join(dir, name, "id"))
		if err != nil {
			r.notes.add(fmt.Errorf("the memory-map calls are not recorded: %w; %s", err, cost))
			return nil
		}
		id, err := strconv.ParseUint(strings.TrimSpace(string(idText)), 10, 64)
		if err != nil {
			r.notes.add(fmt.Errorf("the memory-map calls are not recorded: %s/id: %w; %s", name, err, cost))
			return nil
		}
		format, err := r.sys.ReadFile(filepath.Join(dir, name, "format"))
		if err != nil {
			r.notes.add(fmt.Errorf("the memory-map calls are not recorded: %w; %s", err, cost))
			return nil
		}
		out = append(out, rec.Probe{Event: name, ID: id, Format: format, Stack: name == "sys_enter_mmap"})
	}
	return out
}
