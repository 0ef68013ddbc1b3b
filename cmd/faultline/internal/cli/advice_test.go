package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/attribute/correlate"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/binfile"
)

// TestAdvice: the libraries' errors, as the commands print them, end with
// what to do, in the commands' terms; errors of no known kind get nothing.
// The errors are wrapped as the commands receive them.
func TestAdvice(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("app.data: %w", err) }
	for _, c := range []struct {
		err  error
		want string // the whole text
	}{
		{wrap(analyze.ErrNoEvents), "app.data: the recording describes no events (it ends before any attr): was it cut short?"},
		{wrap(&analyze.MissingEventError{Role: analyze.RoleFault, Events: "probe_libc:malloc"}),
			"app.data: the recording has no page-fault event (events: probe_libc:malloc); record with -e page-faults:u -d or -e exceptions:page_fault_user"},
		{wrap(&analyze.MissingEventError{Role: analyze.RoleAllocEntry, Events: "page-faults:u"}),
			"app.data: the recording has no allocator entry probe (events: page-faults:u); add one with perf probe -x LIBC 'malloc size=%di:u64', or use faultline record"},
		{wrap(&analyze.NoAllocationsError{Faults: 5000, Libc: "/lib/libc.so.6"}),
			"app.data: no allocator call was recorded (5000 faults): this recording probed /lib/libc.so.6 (--libc), which the program's malloc does not bind to; record again without --libc (record finds the allocator the program uses and names it)"},
		{wrap(&analyze.NoAllocationsError{Faults: 5000}),
			"app.data: no allocator call was recorded (5000 faults): the probed allocator is not the one the program calls (a statically linked or stripped allocator?); record again with faultline record, which names the allocator it probed, or name its library with --libc"},
		{&symbolize.ArchError{Machine: "aarch64"}, "the recording was made on aarch64; faultline unwinds x86_64 recordings only, so analyze one made on an x86_64 machine"},
		{&binfile.ServerError{URL: "http://d", Err: errors.New("connection refused")},
			"debuginfod: connection refused (is the server up? unset DEBUGINFOD_URLS or pass --no-debuginfod to skip it)"},
		{fmt.Errorf("fault log: %w", correlate.ErrTooManyFaults), "fault log: more than 10000000 faults; select one program with --pid or --comm"},
		{fmt.Errorf("fault log: the recording's fault samples (page-faults) carry %w", correlate.ErrNoFaultAddress),
			"fault log: the recording's fault samples (page-faults) carry no data address; record with perf record -d -e page-faults:u -c 1, or -e exceptions:page_fault_user"},
		{fmt.Errorf("fault log: %w", correlate.ErrNoFaultSamples),
			"fault log: the recording has no page-fault samples; record with perf record -d -e page-faults:u -c 1, or -e exceptions:page_fault_user"},
		{&perfdata.FormatError{Offset: 0xa8, Msg: "data truncated", Truncated: true},
			"data truncated (at 0xa8); was perf record stopped before it finished writing, or the file cut short (a copy stopped early, a full disk)?"},
		{&perfdata.FormatError{Offset: 8, Msg: "bad magic"}, "bad magic (at 0x8)"},
		{errors.New("anything else"), "anything else"},
	} {
		if got := withAdvice(c.err); got != c.want {
			t.Errorf("%#v:\n got %s\nwant %s", c.err, got, c.want)
		}
	}
	// The binaries' fixes, chosen by the file.
	for _, c := range []struct {
		err  error
		want string
	}{
		{&binfile.NoDebugInfoError{Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"}, "; to fix: install libc6-dbg"},
		{&binfile.NoDebugInfoError{Path: "/home/u/app"}, "; to fix: rebuild it with -g"},
		{&binfile.NotFoundError{Path: "/app", Searched: []string{"/sym/app"}, SymfsOnly: true}, ". Put the recording machine's file under the --symfs directory at its recorded path, or pass --symfs-fallback"},
		{&binfile.NotFoundError{Path: "/app", Searched: []string{"/app"}}, ". Copy the recording machine's binaries under a directory and pass --symfs DIR"},
		{&binfile.MismatchError{Path: "/app", File: "/app", Why: "build ID"}, "; to name them: analyze where the recorded binary still is"},
	} {
		if got := withAdvice(c.err); !strings.Contains(got, c.err.Error()+c.want) {
			t.Errorf("%#v: %s; want it followed by %q", c.err, got, c.want)
		}
	}
	for _, err := range []error{&binfile.NotFoundError{Path: "[vdso]"}, &binfile.MismatchError{Path: "/app", Used: true}} {
		if a := advice(err); a != "" {
			t.Errorf("%#v: advice %q, want none", err, a)
		}
	}
}
