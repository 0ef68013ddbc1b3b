package cli

import (
	"errors"
	"strings"

	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/attribute/correlate"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/binfile"
)

// The libraries' errors say what is wrong; what to do about it is the
// command line's to say, in terms of its commands and flags. advice is
// that: the text to put after err (each piece with its separator), or ""
// when there is nothing to add. An error that wraps several (a missing
// event explained by a truncated file) gets the advice for each, the
// cause's first.
func advice(err error) string {
	var b strings.Builder
	var format *perfdata.FormatError
	if errors.As(err, &format) && format.Truncated {
		b.WriteString("; was perf record stopped before it finished writing, or the file cut short (a copy stopped early, a full disk)?")
	}
	var (
		missing  *analyze.MissingEventError
		noAllocs *analyze.NoAllocationsError
		unattr   *analyze.UnattributedError
		arch     *symbolize.ArchError
		server   *binfile.ServerError
		notFound *binfile.NotFoundError
		noDebug  *binfile.NoDebugInfoError
		mismatch *binfile.MismatchError
	)
	switch {
	case errors.Is(err, analyze.ErrNoEvents):
		b.WriteString(": was it cut short?")
	case errors.As(err, &missing) && missing.Role == analyze.RoleFault:
		b.WriteString("; record with -e page-faults:u -d or -e exceptions:page_fault_user")
	case errors.As(err, &missing):
		b.WriteString("; add one with perf probe -x LIBC 'malloc size=%di:u64', or use faultline record")
	case errors.As(err, &noAllocs) && noAllocs.Libc != "":
		b.WriteString("; record again without --libc (record finds the allocator the program uses and names it)")
	case errors.As(err, &noAllocs):
		b.WriteString("; record again with faultline record, which names the allocator it probed, or name its library with --libc")
	case errors.As(err, &unattr) && unattr.Allocator != "":
		b.WriteString("; record with faultline record, which records jemalloc's, tcmalloc's and mimalloc's own calls (in-process where the allocator is a shared library, with uprobes where it is linked into the program)")
	case errors.As(err, &unattr):
		b.WriteString("; the program's allocator may be one the recording did not probe (linked into the program, custom, a runtime's own heap): record with faultline record, which finds the allocator and records the memory-map calls that give such memory its call's stack")
	case errors.As(err, &arch):
		b.WriteString(", so analyze one made on an x86_64 machine")
	case errors.As(err, &server):
		b.WriteString(" (is the server up? unset DEBUGINFOD_URLS or pass --no-debuginfod to skip it)")
	case errors.As(err, &notFound) && notFound.Fix() != "":
		b.WriteString(". " + notFound.Fix())
	case errors.As(err, &noDebug):
		b.WriteString("; to fix: " + noDebug.Fix())
	case errors.As(err, &mismatch) && !mismatch.Used:
		b.WriteString("; " + mismatch.Fix())
	case errors.Is(err, correlate.ErrTooManyFaults):
		b.WriteString("; select one program with --pid or --comm")
	case errors.Is(err, correlate.ErrCounterClock):
		b.WriteString("; record with trace_clock mono or local")
	case errors.Is(err, correlate.ErrNoFaultAddress), errors.Is(err, correlate.ErrNoFaultSamples):
		b.WriteString("; record with perf record -d -e page-faults:u -c 1, or -e exceptions:page_fault_user")
	}
	return b.String()
}

// withAdvice is err's text followed by what to do about it.
func withAdvice(err error) string {
	return err.Error() + advice(err)
}
