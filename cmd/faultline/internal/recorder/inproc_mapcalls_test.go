package recorder

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
)

// TestInprocSyscallEventsHaveShimCalls: every syscall event analysis
// reads (schema.SyscallEvents) is one the shim records, and every call the
// shim records has its sys_enter event there.
func TestInprocSyscallEventsHaveShimCalls(t *testing.T) {
	enter := map[shim.Sys]bool{}
	for _, name := range schema.SyscallEvents {
		call, exit := strings.CutPrefix(name, "sys_exit_")
		if !exit {
			call = strings.TrimPrefix(name, "sys_enter_")
		}
		c := sysByName(call)
		if c >= shim.NumSys {
			t.Errorf("%s: the shim records no %s", name, call)
			continue
		}
		if !exit {
			enter[c] = true
		}
	}
	for c := shim.Sys(0); c < shim.NumSys; c++ {
		if !enter[c] {
			t.Errorf("the shim records %v, but schema.SyscallEvents has no sys_enter_%v", c, c)
		}
	}
}

// TestInprocSyscallFormatsMatchKernel compares the formats the recorder
// writes for the in-process syscall events with the kernel's own, from
// tracefs (the independent source): the same fields at the same offsets,
// sizes and signedness, so that one reader reads both methods' events.
func TestInprocSyscallFormatsMatchKernel(t *testing.T) {
	for _, name := range schema.SyscallEvents {
		call, exit := strings.CutPrefix(name, "sys_exit_")
		if !exit {
			call = strings.TrimPrefix(name, "sys_enter_")
		}
		text, err := os.ReadFile(filepath.Join("/sys/kernel/tracing/events", schema.SyscallSystem, name, "format"))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			t.Skipf("the kernel's syscall tracepoint formats are not readable here (%v): they are the reference", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		kernel, err := perfdata.ParseTraceFormat(schema.SyscallSystem, text)
		if err != nil {
			t.Fatalf("%s: kernel format: %v", name, err)
		}
		ours, err := perfdata.ParseTraceFormat(schema.SyscallSystem, sysFormat(name, 1, sysCalls[sysByName(call)], exit))
		if err != nil {
			t.Fatalf("%s: our format: %v", name, err)
		}
		if len(ours.Fields) != len(kernel.Fields) {
			t.Errorf("%s: %d fields, the kernel's %d", name, len(ours.Fields), len(kernel.Fields))
		}
		for _, k := range kernel.Fields {
			o := ours.Field(k.Name)
			if o == nil {
				t.Errorf("%s: no field %s", name, k.Name)
				continue
			}
			if o.Offset != k.Offset || o.Size != k.Size || o.Signed != k.Signed {
				t.Errorf("%s.%s: offset %d size %d signed %v, the kernel's %d %d %v", name, k.Name, o.Offset, o.Size, o.Signed, k.Offset, k.Size, k.Signed)
			}
		}
	}
}
