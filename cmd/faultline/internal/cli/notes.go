package cli

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
	"github.com/faultline/faultline/symbolize/binfile"
)

// notes is the one path by which a command's warnings reach the user. The
// libraries return warnings as values (errors, some of a kind the notes
// know, such as *binfile.NoDebugInfoError); a command adds them here and
// writes them once, at the end, on standard error:
//   - each said once, however often it was added;
//   - binaries without debug info summarized in a line or two, details with -v;
//   - details (*detailNote, *recorder.DetailNote) only with -v;
//   - at most maxWarnings other warnings unless -v, the rest counted;
//   - warnings a library counted but did not keep counted too;
//   - nothing at all under -q (the command does not call write).
type notes struct {
	seen     map[string]bool
	noDebug  []*binfile.NoDebugInfoError
	budget   []error // *binfile.BudgetError within: summarized in one line unless -v
	details  []error // *detailNote, *recorder.DetailNote: said only with -v
	warnings []error
	dropped  int // warnings a library counted but did not keep
}

// detailNote is a fact that asks nothing of the user (an allocator function
// that is another's alias, probed once): the notes say it only with -v.
type detailNote struct{ error }

func (d *detailNote) Unwrap() error { return d.error }

// maxWarnings is how many warnings other than missing debug info are
// printed without -v.
const maxWarnings = 3

// add gathers warnings.
func (n *notes) add(errs ...error) {
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	for _, err := range errs {
		if err == nil || n.seen[err.Error()] {
			continue
		}
		n.seen[err.Error()] = true
		var dn *detailNote
		var rdn *rec.DetailNote
		if errors.As(err, &dn) || errors.As(err, &rdn) {
			n.details = append(n.details, err)
			continue
		}
		var be *binfile.BudgetError
		if errors.As(err, &be) {
			n.budget = append(n.budget, err)
			continue
		}
		var nd *binfile.NoDebugInfoError
		if errors.As(err, &nd) {
			// One per binary, however it was wrapped on the way.
			if !n.seen["nodebug\x00"+nd.Path] {
				n.seen["nodebug\x00"+nd.Path] = true
				n.noDebug = append(n.noDebug, nd)
			}
			continue
		}
		n.warnings = append(n.warnings, err)
	}
}

// drop counts k warnings that were not kept where they arose.
func (n *notes) drop(k int) { n.dropped += max(k, 0) }

// write prints the notes on w: summarized, or every one in full when
// verbose.
func (n *notes) write(w io.Writer, verbose bool) {
	if verbose {
		for _, d := range n.details {
			fmt.Fprintf(w, "faultline: note: %s\n", withAdvice(d))
		}
		for _, nd := range n.noDebug {
			fmt.Fprintf(w, "faultline: note: %s\n", withAdvice(nd))
		}
		for _, b := range n.budget {
			fmt.Fprintf(w, "faultline: note: %s\n", b)
		}
	} else {
		if len(n.budget) > 0 {
			var be *binfile.BudgetError
			errors.As(n.budget[0], &be)
			fmt.Fprintf(w, "faultline: note: debug info or tables of %d binaries not read: the recording (%d bytes) is too small for them (what analyze reads follows the recording's size); frames there are named from symbol tables or by offset; -v lists them\n",
				len(n.budget), be.Input)
		}
		var system, own []*binfile.NoDebugInfoError
		for _, nd := range n.noDebug {
			if nd.System() {
				system = append(system, nd)
			} else {
				own = append(own, nd)
			}
		}
		if len(system) > 0 {
			fmt.Fprintf(w, "faultline: note: no debug info for %s: names from their symbol tables; faultline help debuginfo\n",
				countNames(system, "system library", "system libraries"))
		}
		if len(own) > 0 {
			them := "them"
			if len(own) == 1 {
				them = "it"
			}
			fmt.Fprintf(w, "faultline: note: no debug info in %s: no file:line or inline frames; build %s with -g\n",
				countNames(own, "binary", "binaries"), them)
		}
	}
	shown := n.warnings
	if !verbose && len(shown) > maxWarnings {
		shown = shown[:maxWarnings]
	}
	for _, err := range shown {
		fmt.Fprintf(w, "faultline: warning: %s\n", withAdvice(err))
	}
	switch hidden := len(n.warnings) - len(shown); {
	case hidden > 0 && n.dropped > 0:
		fmt.Fprintf(w, "faultline: warning: %d more warnings (-v shows them), and %d not kept\n", hidden, n.dropped)
	case hidden > 0:
		fmt.Fprintf(w, "faultline: warning: %d more warnings (-v shows them)\n", hidden)
	case n.dropped > 0:
		fmt.Fprintf(w, "faultline: warning: %d more warnings not kept\n", n.dropped)
	}
}

// countNames says "2 system libraries (libstdc++.so.6, libgcc_s.so.1)",
// naming at most three.
func countNames(nds []*binfile.NoDebugInfoError, one, many string) string {
	var names []string
	for _, nd := range nds[:min(len(nds), 3)] {
		names = append(names, path.Base(nd.Path))
	}
	list := strings.Join(names, ", ")
	if len(nds) > 3 {
		list += fmt.Sprintf(" and %d more", len(nds)-3)
	}
	if len(nds) == 1 {
		return list
	}
	return fmt.Sprintf("%d %s (%s)", len(nds), many, list)
}

// debuginfoHelp is 'faultline help debuginfo'.
const debuginfoHelp = `Debug info: what faultline needs to name frames, and where it looks

A frame is named by function, source file and line, with inlined calls shown,
only when the binary's DWARF debug info is at hand. Without it faultline names
the function from the binary's symbol table (.symtab, or only the exported
.dynsym symbols of a stripped library): the profile still attributes every
fault, but a site reads "fill" rather than "fill app.cpp:31", and functions
inlined into it are missing.

Your own programs and libraries: build them with -g (any -O level). Keep the
unstripped binary, or its separate debug file (objcopy --only-keep-debug),
where faultline looks.

System libraries (libc, libstdc++, libgcc_s, ...): install their debug
packages on the machine running faultline:
  Debian/Ubuntu  apt-get install libc6-dbg; other libraries' -dbgsym packages
                 come from the debug archive (https://wiki.debian.org/HowToGetABacktrace)
  Fedora         dnf debuginfo-install glibc libstdc++
  any            set DEBUGINFOD_URLS (e.g. https://debuginfod.debian.net): analyze
                 then downloads what is missing, by build ID, into the
                 debuginfod client cache that gdb and debuginfod-find share
                 ($DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client,
                 else ~/.cache/debuginfod_client); DEBUGINFOD_TIMEOUT (s) and
                 DEBUGINFOD_MAXSIZE (bytes, default 1 GiB) bound it;
                 --no-debuginfod turns it off. Without DEBUGINFOD_URLS nothing
                 is ever downloaded.

Where faultline looks, in perf's order: the binary itself; perf's build-id
cache (~/.debug, $PERF_BUILDID_DIR or --buildid-dir); the .gnu_debuglink file
next to the binary and under /usr/lib/debug; /usr/lib/debug/.build-id; the
debuginfod client cache; last, the debuginfod servers. --symfs DIR puts DIR
in front of every path, for a recording made on another machine (copy its
binaries and /usr/lib/debug there, or unpack 'perf archive' output into
~/.debug).

Only the binary that ran is used: a file whose build ID differs from the
recorded one (or, for a recording without build IDs, whose inode or inode
generation differs from the mapping's) is neither unwound nor named from,
and the summary counts the frames left unnamed. faultline record copies the
binaries it saw into ~/.debug so that a rebuild or an upgrade does not
lose them; --allow-mismatch uses such a file anyway.

faultline analyze -v prints, for each binary without debug info, where it
looked and what would fix it.
`
