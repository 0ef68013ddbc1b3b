package binfile

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"strings"
)

// Locator finds the files behind a recorded mapping the way perf does
// (tools/perf/util/symbol.c dso__load and dso.c dso__read_binary_type_filename,
// with build-id.c for the cache layout). The zero value searches only the
// recorded path on the real file system; NewLocator fills in perf's defaults.
type Locator struct {
	// Symfs is perf's --symfs: a directory holding a copy of the recording
	// machine's files. Recorded paths are cleaned (they may not climb out
	// of it with "..") and looked up as Symfs+path, then as
	// Symfs+"/"+basename (a flat directory). With Symfs set, the host's
	// own files (the recorded path itself, DebugDirs outside Symfs) are
	// searched only when HostFallback is set; the session leaves the host's
	// build-id and debuginfod caches out too unless asked for.
	Symfs string
	// HostFallback also searches the host's files after Symfs, as perf
	// does (faultline's --symfs-fallback). A recording names the paths:
	// without Symfs, or with HostFallback, it can make faultline open any
	// file on this machine (only ever read as ELF, never echoed).
	HostFallback bool
	// BuildIDDir is perf's build-id cache (--buildid-dir; default ~/.debug),
	// holding .build-id/xx/<rest> symlinks to <path>/<bid>/{elf,debug,vdso}.
	// Empty disables the cache.
	BuildIDDir string
	// DebugDirs are the global debug directories (default /usr/lib/debug),
	// searched as DIR/.build-id/xx/<rest>.debug, DIR/<dir>/<debuglink>,
	// DIR/<path>.debug and DIR/<path>; under Symfs when it is set (and
	// then outside it only with HostFallback).
	DebugDirs []string
	// DebuginfodCache is the debuginfod client cache
	// (DIR/<bid>/debuginfo, DIR/<bid>/executable), shared with elfutils'
	// client (debuginfod-find, gdb). Empty disables it.
	DebuginfodCache string
	// Debuginfod fetches a debug file by build ID into DebuginfodCache when
	// none is found locally; nil fetches nothing (DEBUGINFOD_URLS unset,
	// --no-debuginfod).
	Debuginfod Fetcher
	// AllowMismatch uses a file whose identity differs from the recorded
	// one (build ID; without one, device, inode and generation) when
	// nothing matches, with a warning. Unset, such a file is never used:
	// Open returns a *MismatchError.
	AllowMismatch bool
	// FS is the file system; nil means the real one.
	FS FS
	// DWARF bounds the DWARF loaded per binary and, shared by pointer, in
	// all; nil bounds each binary by the defaults (NewCache makes one
	// budget for everything it opens).
	DWARF *DWARFBudget
}

// NewLocator returns a Locator with perf's defaults for a user whose
// environment getenv reads (pass os.Getenv): BuildIDDir from
// $PERF_BUILDID_DIR or $HOME/.debug, DebugDirs /usr/lib/debug, and the
// debuginfod client cache from $DEBUGINFOD_CACHE_PATH, else
// $XDG_CACHE_HOME/debuginfod_client, else $HOME/.cache/debuginfod_client,
// with a Debuginfod client when $DEBUGINFOD_URLS names servers.
func NewLocator(symfs string, getenv func(string) string) Locator {
	home := getenv("HOME")
	l := Locator{Symfs: strings.TrimSuffix(symfs, "/"), DebugDirs: []string{"/usr/lib/debug"}}
	switch {
	case getenv("PERF_BUILDID_DIR") != "":
		l.BuildIDDir = getenv("PERF_BUILDID_DIR")
	case home != "":
		l.BuildIDDir = path.Join(home, ".debug")
	}
	switch {
	case getenv("DEBUGINFOD_CACHE_PATH") != "":
		l.DebuginfodCache = getenv("DEBUGINFOD_CACHE_PATH")
	case getenv("XDG_CACHE_HOME") != "":
		l.DebuginfodCache = path.Join(getenv("XDG_CACHE_HOME"), "debuginfod_client")
	case home != "":
		l.DebuginfodCache = path.Join(home, ".cache", "debuginfod_client")
	}
	if d := newDebuginfod(getenv); d != nil {
		l.Debuginfod = d
	}
	return l
}

func (l *Locator) fs() FS {
	if l.FS == nil {
		return osFS{}
	}
	return l.FS
}

// IsFileMapping reports whether a recorded mapping name can name a file.
// [vdso] counts as a file: perf keeps a copy in its build-id cache.
func IsFileMapping(name string) bool {
	name = strings.TrimSuffix(name, " (deleted)")
	switch {
	case name == "[vdso]":
		return true
	case name == "", strings.HasPrefix(name, "["), // [stack], [heap], [uprobes], [vvar], [vsyscall], [anon:…], [kernel.kallsyms]
		strings.HasPrefix(name, "//anon"), strings.HasPrefix(name, "/anon_hugepage"),
		strings.HasPrefix(name, "/dev/zero"), strings.HasPrefix(name, "/SYSV"),
		strings.HasPrefix(name, "/memfd:"), strings.HasPrefix(name, "anon_inode:"):
		return false
	}
	return true
}

// buildIDLink is perf's build_id_cache__linkname: DIR/.build-id/xx/<rest>.
func buildIDLink(dir, bid string) string {
	return dir + "/.build-id/" + bid[:2] + "/" + bid[2:]
}

// symfsJoin puts a recorded path under Symfs. p must be clean and
// absolute (cleanPath): "/../../etc/shadow" stays inside as /etc/shadow.
func (l *Locator) symfsJoin(p string) string { return l.Symfs + p }

// cleanPath makes a recorded path absolute and lexically clean, so that no
// ".." can climb out of the directory it is joined to.
func cleanPath(p string) string { return path.Clean("/" + p) }

// host reports whether the host's own files may be searched.
func (l *Locator) host() bool { return l.Symfs == "" || l.HostFallback }

// Open finds, opens and indexes the binary recorded as recPath with build
// ID buildID (lowercase hex; "" when the recording has none), with no
// device or inode to check; Cache.Open takes the whole Key.
func (l *Locator) Open(recPath, buildID string) (*Binary, error) {
	return l.openKey(Key{Path: recPath, BuildID: buildID})
}

// openKey finds, opens and indexes the binary of a recorded mapping: by
// build ID first (the build-id cache, the debuginfod cache, the symfs, the
// recorded path), and only a file that is the one that ran. With a build
// ID that is a file with that build ID; without one, the file at the
// recorded path must have the recorded device, inode and generation (when
// k has them). Errors: ErrNotFile (wrapped) for names that are not files,
// *MismatchError when only other files were found (unless AllowMismatch),
// *NotFoundError when nothing was found. A missing debug file is only a
// warning: the Binary falls back to ELF symbols.
func (l *Locator) openKey(k Key) (*Binary, error) {
	recPath, buildID := k.Path, normBuildID(k.BuildID)
	if !IsFileMapping(recPath) {
		return nil, fmt.Errorf("binfile: %s: %w", recPath, ErrNotFile)
	}
	recPath = strings.TrimSuffix(recPath, " (deleted)")
	clean := cleanPath(recPath)
	s := &search{l: l, fsys: l.fs(), want: buildID, rec: recPath}
	if buildID == "" && k.Ino != 0 && l.host() {
		s.ident, s.identPath = k, path.Clean(recPath)
	}
	defer s.closeRest()

	// The binary itself: perf's BUILD_ID_CACHE, then SYSTEM_PATH_DSO (symfs
	// joined), plus symfs's flat layout and, last, the host path.
	var cands []string
	if buildID != "" && l.BuildIDDir != "" {
		link := buildIDLink(l.BuildIDDir, buildID)
		if recPath == "[vdso]" {
			cands = append(cands, link+"/vdso", l.BuildIDDir+"/[vdso]/"+buildID+"/vdso")
		} else {
			// Old caches made the link itself the file; new ones link to a directory.
			cands = append(cands, link, link+"/elf")
		}
	}
	if buildID != "" && l.DebuginfodCache != "" && recPath != "[vdso]" {
		cands = append(cands, l.DebuginfodCache+"/"+buildID+"/executable")
	}
	if recPath != "[vdso]" {
		if l.Symfs != "" {
			cands = append(cands, l.symfsJoin(clean), l.Symfs+"/"+path.Base(clean))
		}
		if l.host() {
			cands = append(cands, path.Clean(recPath))
		}
	}
	bin := s.first(cands, false, nil)

	// The debug file, unless the binary carries its own DWARF.
	var dbg *elfFile
	if bin != nil && bin.hasDWARF() {
		dbg = bin
	} else {
		bid := buildID
		if bid == "" && bin != nil {
			bid = bin.buildID
		}
		dbg = s.findDebug(clean, bid, bin)
		if dbg == nil {
			dbg = s.symOnly
		}
	}
	if bin == nil && dbg == nil {
		if s.mismatch != nil {
			return nil, s.mismatch
		}
		return nil, &NotFoundError{Path: recPath, BuildID: buildID, Searched: s.searched, Rejected: s.rejected, SymfsOnly: !l.host()}
	}
	var warns []error
	warns = append(warns, s.warnings...)
	if bin == nil {
		warns = append(warns, fmt.Errorf("%s: binary not found (searched %s); naming frames from the debug file %s alone",
			recPath, strings.Join(cands, ", "), dbg.path))
	} else if (dbg == nil || !dbg.hasDWARF()) && recPath != "[vdso]" {
		warns = append(warns, &NoDebugInfoError{Path: recPath, File: bin.path, DynsymOnly: !bin.hasSymtab(), Searched: s.debugSearched})
	}
	b, err := newBinary(recPath, buildID, bin, dbg, warns, l.DWARF)
	if err != nil {
		return nil, err
	}
	s.keep(bin)
	s.keep(dbg)
	return b, nil
}

// search tracks what one Open tried and the files it opened.
type search struct {
	l             *Locator
	fsys          FS
	rec           string // the recorded path
	want          string // recorded build ID
	searched      []string
	debugSearched []string
	rejected      []string
	warnings      []error
	opened        []*elfFile
	symOnly       *elfFile // a matching debug file with symbols but no DWARF
	// ident is the recorded identity the file at identPath must have (a
	// recording without build IDs); zero: nothing to check.
	ident     Key
	identPath string
	mismatch  *MismatchError // the first file refused as not the one that ran
}

func (s *search) closeRest() {
	for _, f := range s.opened {
		if f != nil {
			f.close()
		}
	}
}

func (s *search) keep(f *elfFile) {
	for i, g := range s.opened {
		if g == f {
			s.opened[i] = nil
		}
	}
}

// first returns the first candidate that opens as ELF and whose build ID
// matches want (or the first that opens at all, with a warning, when none
// matches). accept, if not nil, vets a candidate further (debuglink CRC).
func (s *search) first(cands []string, debug bool, accept func(*elfFile) string) *elfFile {
	var fallback *elfFile
	seen := map[string]bool{}
	for _, c := range cands {
		if seen[c] {
			continue
		}
		seen[c] = true
		if debug {
			s.debugSearched = append(s.debugSearched, c)
		} else {
			s.searched = append(s.searched, c)
		}
		if !isRegular(s.fsys, c) {
			continue
		}
		f, err := openELFFile(s.fsys, c)
		if err != nil {
			s.rejected = append(s.rejected, err.Error())
			continue
		}
		s.opened = append(s.opened, f)
		if accept != nil {
			if why := accept(f); why != "" {
				s.rejected = append(s.rejected, c+": "+why)
				continue
			}
		}
		if s.want != "" && f.buildID != s.want {
			s.rejected = append(s.rejected, fmt.Sprintf("%s: build ID %q, recorded %s", c, f.buildID, s.want))
			if fallback == nil {
				fallback = f
				if !debug {
					s.refuse(f, fmt.Sprintf("build ID %s, recorded %s", orNone(f.buildID), s.want))
				}
			}
			continue
		}
		if !debug && c == s.identPath {
			if why := identityDiffers(s.ident, f.f); why != "" {
				s.rejected = append(s.rejected, c+": "+why)
				if fallback == nil {
					fallback = f
					s.refuse(f, why)
				}
				continue
			}
		}
		if debug && !f.hasDWARF() {
			// Still worth having for its .symtab (a debug file made from
			// a binary built without -g), if nothing better turns up.
			s.rejected = append(s.rejected, c+": no .debug_info")
			if s.symOnly == nil && f.hasSymtab() {
				s.symOnly = f
			}
			continue
		}
		return f
	}
	if fallback != nil && !debug && s.l.AllowMismatch {
		// Asked for: a rebuilt-but-similar binary names most frames
		// correctly, and the warning says it may not.
		s.warnings = append(s.warnings, &MismatchError{Path: s.mismatch.Path, File: s.mismatch.File, Why: s.mismatch.Why, Used: true})
		s.mismatch = nil
		return fallback
	}
	return nil
}

// refuse notes the first binary candidate that is not the one that ran.
func (s *search) refuse(f *elfFile, why string) {
	if s.mismatch == nil {
		s.mismatch = &MismatchError{Path: s.rec, File: f.path, Why: why}
	}
}

func orNone(id string) string {
	if id == "" {
		return "none"
	}
	return id
}

// findDebug searches for a separate debug file in perf's order: debuglink,
// build-id cache "debug", DIR/.build-id, the Fedora and Ubuntu layouts, and
// the debuginfod client cache. recPath is clean (cleanPath).
func (s *search) findDebug(recPath, bid string, bin *elfFile) *elfFile {
	l := s.l
	saved := s.want
	s.want = bid
	defer func() { s.want = saved }()

	var dirs []string // debug dirs, symfs-joined first
	for _, d := range l.DebugDirs {
		if l.Symfs != "" {
			dirs = append(dirs, l.symfsJoin(cleanPath(d)))
		}
		if l.host() {
			dirs = append(dirs, d)
		}
	}
	if bin != nil && bin.debuglink != "" {
		link := bin.debuglink
		binDir := path.Dir(bin.path)
		recDir := path.Dir(recPath)
		cands := []string{binDir + "/" + link, binDir + "/.debug/" + link}
		for _, d := range dirs {
			cands = append(cands, d+recDir+"/"+link)
		}
		if f := s.first(cands, true, func(f *elfFile) string { return debuglinkMatch(bin, f) }); f != nil {
			return f
		}
	}
	var cands []string
	if bid != "" {
		if l.BuildIDDir != "" {
			cands = append(cands, buildIDLink(l.BuildIDDir, bid)+"/debug")
		}
		for _, d := range dirs {
			cands = append(cands, buildIDLink(d, bid)+".debug")
		}
	}
	if recPath != "[vdso]" {
		for _, d := range dirs {
			cands = append(cands, d+recPath+".debug", d+recPath)
		}
	}
	if bid != "" && l.DebuginfodCache != "" {
		cands = append(cands, l.DebuginfodCache+"/"+bid+"/debuginfo")
	}
	if f := s.first(cands, true, nil); f != nil || bid == "" || l.Debuginfod == nil || l.DebuginfodCache == "" {
		return f
	}
	// Nothing here: ask the debuginfod servers, into the client cache.
	p, err := l.Debuginfod.Fetch(bid, l.DebuginfodCache)
	switch {
	case errors.Is(err, ErrNotOnServer):
		s.debugSearched = append(s.debugSearched, err.Error())
		return nil
	case err != nil:
		s.warnings = append(s.warnings, fmt.Errorf("%s: %w", recPath, err))
		return nil
	}
	return s.first([]string{p}, true, nil)
}

// maxDebuglinkCRC bounds the file a .gnu_debuglink CRC is computed over:
// the CRC covers the whole file, and a sparse file can claim any size.
const maxDebuglinkCRC = 4 << 30

// debuglinkMatch vets a .gnu_debuglink candidate f for bin ("" when it
// matches). Cheap checks come first: build IDs that differ reject it, and
// a file too large to checksum is accepted only when its build ID matches;
// otherwise the CRC decides, as in gdb.
func debuglinkMatch(bin, f *elfFile) string {
	sameID := bin.buildID != "" && f.buildID != ""
	if sameID && f.buildID != bin.buildID {
		return fmt.Sprintf("build ID %s, the binary's is %s", f.buildID, bin.buildID)
	}
	fi, err := f.f.Stat()
	if err != nil {
		return err.Error()
	}
	if fi.Size() > maxDebuglinkCRC {
		if sameID {
			return "" // the build ID vouches for it
		}
		return fmt.Sprintf("%d GiB, too large to check its .gnu_debuglink CRC (and no build ID to match instead)", fi.Size()>>30)
	}
	got, err := fileCRC32(f.f, fi.Size())
	if err != nil {
		return err.Error()
	}
	if got != bin.debuglinkCRC {
		return fmt.Sprintf(".gnu_debuglink CRC %08x, file has %08x", bin.debuglinkCRC, got)
	}
	return ""
}

// fileCRC32 is the CRC gdb and objcopy --add-gnu-debuglink use (IEEE,
// over the whole file of the given size).
func fileCRC32(f File, size int64) (uint32, error) {
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// normBuildID lowercases a hex build ID and drops the zero padding perf
// may leave after a 20-byte ID (its build_id buffer holds 24 bytes);
// anything that is not hex becomes "".
func normBuildID(s string) string {
	s = strings.ToLower(s)
	for len(s) > 40 && strings.HasSuffix(s, "00") {
		s = s[:len(s)-2]
	}
	if !validBuildID(s) {
		return ""
	}
	return s
}

func validBuildID(s string) bool {
	if len(s) < 4 || len(s)%2 != 0 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
