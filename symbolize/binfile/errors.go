package binfile

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrNotFile is returned (wrapped) for recorded mapping names that are not
// files at all: [stack], [heap], //anon, [uprobes], [vvar], … Callers print
// such frames as [unknown] without complaining.
var ErrNotFile = errors.New("mapping is not backed by a file")

// FormatError reports a binary or debug file that debug/elf or debug/dwarf
// could not read (including files that made them panic).
type FormatError struct {
	Path string // the file
	Msg  string // what was being read
	Err  error  // the cause
}

func (e *FormatError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("binfile: %s: %s: %v", e.Path, e.Msg, e.Err)
	}
	return fmt.Sprintf("binfile: %s: %s", e.Path, e.Msg)
}

// Unwrap returns the cause.
func (e *FormatError) Unwrap() error { return e.Err }

// NotFoundError says that no file for a recorded mapping could be found, and
// lists every place that was tried so the user can put the file there; Fix
// says how.
type NotFoundError struct {
	Path     string   // as recorded
	BuildID  string   // as recorded, lowercase hex; "" if unknown
	Searched []string // candidates tried, in order
	Rejected []string // candidates that existed but could not be used, with why
	// SymfsOnly: only the symfs (and an explicit build-id cache) was
	// searched, not the host's files (Locator.HostFallback unset).
	SymfsOnly bool
}

func (e *NotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "binfile: no file for %s", e.Path)
	if e.BuildID != "" {
		fmt.Fprintf(&b, " (build ID %s)", e.BuildID)
	}
	if len(e.Searched) == 0 {
		// Only [vdso] gets here: it exists nowhere but in the build-id cache.
		b.WriteString(": the vdso is found only by build ID in perf's build-id cache, and the recording has none for it")
		return b.String()
	}
	b.WriteString("; searched ")
	b.WriteString(strings.Join(e.Searched, ", "))
	if len(e.Rejected) > 0 {
		b.WriteString("; rejected ")
		b.WriteString(strings.Join(e.Rejected, "; "))
	}
	return b.String()
}

// Fix says how to give analysis the file: "" for the vdso, which only
// perf's build-id cache holds.
func (e *NotFoundError) Fix() string {
	switch {
	case len(e.Searched) == 0:
		return ""
	case e.SymfsOnly:
		return "Put the recording machine's file under the --symfs directory at its recorded path," +
			" or pass --symfs-fallback to search this machine's files too"
	}
	return "Copy the recording machine's binaries under a directory and pass --symfs DIR," +
		" or run 'perf archive' there and unpack it into ~/.debug (or pass --buildid-dir)"
}

// NoDebugInfoError is the warning a Binary carries when no DWARF was found
// for it: frames in it are named from its symbol table, without inline
// frames or file:line. Error spells out where faultline looked; Fix says
// how to give the binary debug info.
type NoDebugInfoError struct {
	Path       string   // the binary as recorded
	File       string   // the file opened for it
	DynsymOnly bool     // no .symtab either: only exported symbols name frames
	Searched   []string // where debug files were looked for, in order
}

func (e *NoDebugInfoError) Error() string {
	sym := "ELF symbols only"
	if e.DynsymOnly {
		sym = "exported (.dynsym) symbols only"
	}
	// The places searched are many and follow perf's documented order,
	// so only the first is named.
	where := "nowhere"
	if len(e.Searched) > 0 {
		where = fmt.Sprintf("%d places (first %s)", len(e.Searched), e.Searched[0])
	}
	return fmt.Sprintf("%s: no debug info (no inline frames or file:line; %s); searched %s", e.Path, sym, where)
}

// System reports whether the binary was installed by the system (under
// /usr, /lib, /bin, /sbin, /opt not included): its debug info comes from a
// package, whereas a binary of the user's own is rebuilt with -g.
func (e *NoDebugInfoError) System() bool {
	for _, dir := range []string{"/usr/", "/lib/", "/lib32/", "/lib64/", "/bin/", "/sbin/"} {
		if strings.HasPrefix(e.Path, dir) && !strings.HasPrefix(e.Path, "/usr/local/") {
			return true
		}
	}
	return false
}

// Fix says how to give the binary debug info.
func (e *NoDebugInfoError) Fix() string {
	base := path.Base(e.Path)
	switch {
	case strings.HasPrefix(base, "libc.so") || strings.HasPrefix(base, "ld-linux"):
		return "install libc6-dbg (apt-get install libc6-dbg) on the machine running faultline, or pass --symfs DIR holding the recording machine's /usr/lib/debug"
	case !e.System():
		return "rebuild it with -g (the profile names its functions, not their lines, until then), or pass --symfs DIR holding a build with debug info"
	}
	return "install the package's debug symbols (Debian: the -dbg or -dbgsym package; see https://wiki.debian.org/HowToGetABacktrace)," +
		" put them under --symfs DIR, or set DEBUGINFOD_URLS to a debuginfod server (e.g. https://debuginfod.debian.net) for analyze to fetch them"
}

// MismatchError says that the files found for a recorded mapping are not
// the binary that ran: another build ID, or (a recording without build
// IDs) another device, inode or generation. Frames in the mapping are
// neither unwound by its CFI nor named from it; Fix says how to name them.
// As a warning (Used) it says that --allow-mismatch made faultline use the
// file anyway.
type MismatchError struct {
	Path string // as recorded
	File string // the first file refused
	Why  string // how it differs
	Used bool   // used anyway (Locator.AllowMismatch)
}

func (e *MismatchError) Error() string {
	if e.Used {
		return fmt.Sprintf("%s: %s is not the binary that ran (%s); used anyway (--allow-mismatch): frames may be misnamed", e.Path, e.File, e.Why)
	}
	return fmt.Sprintf("%s: %s is not the binary that ran (%s); its frames are left unnamed", e.Path, e.File, e.Why)
}

// Fix says how to name the mapping's frames.
func (e *MismatchError) Fix() string {
	return "to name them: analyze where the recorded binary still is, keep perf's build-id cache (faultline record and perf record fill ~/.debug; pass --buildid-dir for a copy)," +
		" pass --symfs DIR holding the binary that ran, or --allow-mismatch to use this file anyway"
}
