// Package libc finds the allocator a program really uses — the object its
// malloc binds to: its C library, a preloaded or needed allocator library,
// or the program itself — and the file offsets of its functions, for
// placing uprobes: from a command's ELF dependencies (PT_INTERP,
// DT_NEEDED, RUNPATH, LD_LIBRARY_PATH, the ld.so cache, LD_PRELOAD) or
// from a running process's /proc/PID/maps. It runs no ldd: ldd executes
// the program's loader.
package libc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/faultline/faultline/perfdata/schema"
)

// System is the outside world the search reads; tests substitute a fake.
type System interface {
	LookPath(file string) (string, error)
	Run(name string, args ...string) (stdout, stderr []byte, err error)
	ReadFile(path string) ([]byte, error)
	// Open opens a file for random access (ELF files can be large).
	Open(path string) (File, error)
	Exists(path string) bool
	Inode(path string) (uint64, error)
	Getenv(key string) string
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.Closer
}

// IsLibcName reports whether a file's base name is glibc's (or musl's) C
// library: libc.so.6, libc-2.31.so, libc.musl-x86_64.so.1.
func IsLibcName(base string) bool { return libcRE.MatchString(base) }

var libcRE = regexp.MustCompile(`^libc(\.so(\.\d+)*|-\d[\d.]*\.so|\.musl-[\w-]+\.so(\.\d+)*)$`)

// ResolveCommand finds name as exec would: a name with a slash as is, else
// through PATH.
func ResolveCommand(sys System, name string) (string, error) {
	if strings.Contains(name, "/") {
		if !sys.Exists(name) {
			return "", fmt.Errorf("%s: no such file", name)
		}
		return name, nil
	}
	p, err := sys.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("command %q not found in PATH", name)
	}
	return p, nil
}

// binInfo is what the search needs from one ELF file.
type binInfo struct {
	class   elf.Class
	machine elf.Machine
	interp  string
	needed  []string
	paths   []string // DT_RUNPATH, else DT_RPATH, $ORIGIN expanded
}

// readELF opens path through sys and returns what read takes from its ELF
// view; the error of a file that is not ELF is debug/elf's, without the
// path. debug/elf can panic on hostile files; a panic becomes an error.
func readELF[T any](sys System, path string, read func(f *elf.File, path string) T) (v T, err error) {
	r, err := sys.Open(path)
	if err != nil {
		return v, err
	}
	defer r.Close()
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v, err = zero, fmt.Errorf("%s: malformed ELF file (%v)", path, p)
		}
	}()
	f, err := elf.NewFile(r)
	if err != nil {
		return v, err
	}
	return read(f, path), nil
}

// dynInfo collects what the search needs from f, the ELF file at path.
func dynInfo(f *elf.File, path string) *binInfo {
	bi := &binInfo{class: f.Class, machine: f.Machine}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				bi.interp = strings.TrimRight(string(b), "\x00")
			}
		}
	}
	// A file without a dynamic section has no needed libraries.
	bi.needed = dynStrings(f, elf.DT_NEEDED)
	runpath := dynStrings(f, elf.DT_RUNPATH)
	if len(runpath) == 0 {
		runpath = dynStrings(f, elf.DT_RPATH)
	}
	origin := filepath.Dir(path)
	for _, rp := range runpath {
		for _, d := range strings.Split(rp, ":") {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
			if d != "" {
				bi.paths = append(bi.paths, d)
			}
		}
	}
	return bi
}

// dynStrings returns the strings of f's dynamic entries tagged tag
// (DT_NEEDED, DT_RUNPATH), as debug/elf's DynString does, but read one by
// one from the dynamic string table rather than reading it whole: a C++
// runtime's is over half a megabyte, and every recording looks through
// the libraries its program needs.
func dynStrings(f *elf.File, tag elf.DynTag) []string {
	ds := f.SectionByType(elf.SHT_DYNAMIC)
	if ds == nil || ds.Link == 0 || int(ds.Link) >= len(f.Sections) {
		return nil
	}
	offs, err := f.DynValue(tag)
	if err != nil {
		return nil
	}
	strtab := f.Sections[ds.Link]
	var out []string
	for _, off := range offs {
		if s, ok := sectionString(strtab, off); ok {
			out = append(out, s)
		}
	}
	return out
}

// maxDynString bounds one dynamic string (a library name or a search path).
const maxDynString = 64 << 10

// sectionString reads the NUL-terminated string at off in sec.
func sectionString(sec *elf.Section, off uint64) (string, bool) {
	var chunk [256]byte
	var s []byte
	for off < sec.Size && len(s) < maxDynString {
		n, err := sec.ReadAt(chunk[:min(uint64(len(chunk)), sec.Size-off)], int64(off))
		if i := bytes.IndexByte(chunk[:n], 0); i >= 0 {
			return string(append(s, chunk[:i]...)), true
		}
		if err != nil || n == 0 {
			return "", false
		}
		s = append(s, chunk[:n]...)
		off += uint64(n)
	}
	return "", false
}

// maxShebang bounds #! chains (a script run by a script ...).
const maxShebang = 4

// followShebang returns the program that runs when path is executed: path
// itself, or for a #! script its interpreter (and so on, a few deep).
func followShebang(sys System, path string) (string, error) {
	for range maxShebang {
		head, err := readHead(sys, path, 256)
		if err != nil {
			return "", err
		}
		if !bytes.HasPrefix(head, []byte("#!")) {
			return path, nil
		}
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		f := strings.Fields(string(line))
		if len(f) == 0 {
			return "", fmt.Errorf("%s: empty #! line", path)
		}
		interp := f[0]
		if filepath.Base(interp) == "env" && len(f) > 1 {
			interp = f[1]
			if f[1] == "-S" && len(f) > 2 {
				interp = f[2]
			}
		}
		if path, err = ResolveCommand(sys, interp); err != nil {
			return "", fmt.Errorf("%s's interpreter: %w", path, err)
		}
	}
	return path, nil
}

// Preloadable reports whether a library preloaded into the program at
// path (LD_PRELOAD) interposes its allocator: the program (or its #!
// interpreter) must be dynamically linked, not setuid or setgid (the
// loader ignores LD_PRELOAD there), and must not define malloc itself (its
// own calls then bind to its own). If not, why says which.
func Preloadable(sys System, path string) (ok bool, why string) {
	prog, err := followShebang(sys, path)
	if err != nil {
		return false, err.Error()
	}
	if fi, err := os.Stat(prog); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		return false, prog + " is setuid or setgid: the loader ignores LD_PRELOAD for it"
	}
	type info struct {
		static, mallocDefined bool
	}
	in, err := readELF(sys, prog, func(f *elf.File, _ string) info {
		var in info
		in.static = true
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				in.static = false
			}
		}
		in.mallocDefined = dynDefines(f)("malloc")
		return in
	})
	switch {
	case err != nil:
		return false, fmt.Sprintf("%s: not an ELF program (%v)", prog, err)
	case in.static:
		return false, prog + " is statically linked: nothing can be preloaded into it"
	case in.mallocDefined:
		return false, prog + " defines malloc itself: its calls do not reach a preloaded library"
	}
	return true, ""
}

// readHead returns up to n bytes from the start of path.
func readHead(sys System, path string, n int) ([]byte, error) {
	r, err := sys.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b := make([]byte, n)
	m, err := r.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:m], nil
}

// canonical resolves symlinks so messages show the real file; uprobes are
// per inode, so either name would work.
func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// findLib searches for a needed library the way ld.so does: RUNPATH,
// LD_LIBRARY_PATH, the cache, the default directories. Candidates of the
// wrong class or machine (a 32-bit libc in /usr/lib32) are skipped.
func findLib(sys System, name string, bin *binInfo, cache map[string][]string) string {
	ok := func(p string) bool {
		if !sys.Exists(p) {
			return false
		}
		bi, err := readELF(sys, p, dynInfo)
		return err == nil && bi.class == bin.class && bi.machine == bin.machine
	}
	if strings.Contains(name, "/") {
		if ok(name) {
			return name
		}
		return ""
	}
	var dirs []string
	dirs = append(dirs, bin.paths...)
	for _, d := range strings.Split(sys.Getenv("LD_LIBRARY_PATH"), ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if p := filepath.Join(d, name); ok(p) {
			return p
		}
	}
	for _, p := range cache[name] {
		if ok(p) {
			return p
		}
	}
	for _, d := range defaultDirs(bin) {
		if p := filepath.Join(d, name); ok(p) {
			return p
		}
	}
	return ""
}

// multiarch is Debian's multiarch triplet for each machine.
var multiarch = map[elf.Machine]string{
	elf.EM_X86_64:  "x86_64-linux-gnu",
	elf.EM_AARCH64: "aarch64-linux-gnu",
	elf.EM_386:     "i386-linux-gnu",
	elf.EM_RISCV:   "riscv64-linux-gnu",
	elf.EM_PPC64:   "powerpc64le-linux-gnu",
	elf.EM_S390:    "s390x-linux-gnu",
}

// defaultDirs are the loader's trusted directories: Debian's multiarch
// ones first, then the classic ones.
func defaultDirs(bin *binInfo) []string {
	triplet := multiarch[bin.machine]
	var dirs []string
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	if bin.class == elf.ELFCLASS64 {
		dirs = append(dirs, "/lib64", "/usr/lib64")
	}
	return append(dirs, "/lib", "/usr/lib")
}

// ldCacheFile is where ld.so reads its cache.
const ldCacheFile = "/etc/ld.so.cache"

// ldCache reads the ld.so cache: the file itself, or where its format is
// not one ParseLdCache knows, through `ldconfig -p`; without either the
// search goes on without it.
func ldCache(sys System) map[string][]string {
	if data, err := sys.ReadFile(ldCacheFile); err == nil {
		if m, err := ParseLdCache(data); err == nil {
			return m
		}
	}
	for _, name := range []string{"ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"} {
		p, err := sys.LookPath(name)
		if err != nil {
			continue
		}
		out, _, err := sys.Run(p, "-p")
		if err != nil {
			continue
		}
		return ParseLdconfig(string(out))
	}
	return nil
}

// The ld.so cache's formats, as glibc's sysdeps/generic/dl-cache.h lays
// them out. The new format ("glibc-ld.so.cache1.1") is a 48-byte header
// (magic and version, nlibs, len_strings, an endianness byte, the
// extension offset) and nlibs 24-byte entries (flags, key, value,
// osversion, hwcap); key and value are offsets of NUL-terminated strings
// from the header's start. Caches of glibc before 2.32 may begin with the
// old format ("ld.so-1.7.0", nlibs, 12-byte entries), the new one
// following at the next multiple of 8.
const (
	ldCacheNewMagic   = "glibc-ld.so.cache1.1"
	ldCacheNewHeader  = 48
	ldCacheNewEntry   = 24
	ldCacheOldMagic   = "ld.so-1.7.0"
	ldCacheOldHeader  = 16
	ldCacheOldEntry   = 12
	ldCacheLittle     = 2 // the endianness byte: little-endian
	ldCacheEndianByte = 28
)

// ParseLdCache parses an ld.so cache file into library name → paths in
// cache order (every architecture: the caller checks each candidate's
// class and machine), as ParseLdconfig does `ldconfig -p`'s listing. A
// format it does not know (big-endian, or a layout it cannot bound) is an
// error.
func ParseLdCache(data []byte) (map[string][]string, error) {
	le := binary.LittleEndian
	if bytes.HasPrefix(data, []byte(ldCacheOldMagic)) {
		if len(data) < ldCacheOldHeader {
			return nil, fmt.Errorf("ld.so cache: %d bytes, shorter than its header", len(data))
		}
		n := uint64(le.Uint32(data[12:]))
		off := (ldCacheOldHeader + n*ldCacheOldEntry + 7) &^ 7
		if off > uint64(len(data)) {
			return nil, fmt.Errorf("ld.so cache: %d old-format entries overrun its %d bytes", n, len(data))
		}
		data = data[off:]
	}
	if !bytes.HasPrefix(data, []byte(ldCacheNewMagic)) {
		return nil, errors.New("ld.so cache: no glibc-ld.so.cache1.1 header")
	}
	if len(data) < ldCacheNewHeader {
		return nil, fmt.Errorf("ld.so cache: %d bytes, shorter than its header", len(data))
	}
	if e := data[ldCacheEndianByte]; e != 0 && e != ldCacheLittle {
		return nil, fmt.Errorf("ld.so cache: endianness %d, not little-endian", e)
	}
	n := uint64(le.Uint32(data[20:]))
	if ldCacheNewHeader+n*ldCacheNewEntry > uint64(len(data)) {
		return nil, fmt.Errorf("ld.so cache: %d entries overrun its %d bytes", n, len(data))
	}
	str := func(off uint32) (string, bool) {
		if uint64(off) >= uint64(len(data)) {
			return "", false
		}
		end := bytes.IndexByte(data[off:], 0)
		if end < 0 {
			return "", false
		}
		return string(data[off : int(off)+end]), true
	}
	m := map[string][]string{}
	for i := range n {
		e := data[ldCacheNewHeader+i*ldCacheNewEntry:]
		key, ok1 := str(le.Uint32(e[4:]))
		value, ok2 := str(le.Uint32(e[8:]))
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("ld.so cache: entry %d names a string outside the file", i)
		}
		m[key] = append(m[key], value)
	}
	return m, nil
}

// ParseLdconfig parses `ldconfig -p` output, whose lines read
//
//	libc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6
//
// into library name → paths in cache order (every architecture: the
// caller checks each candidate's class and machine).
func ParseLdconfig(out string) map[string][]string {
	m := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		left, path, ok := strings.Cut(line, " => ")
		if !ok {
			continue
		}
		f := strings.Fields(left)
		if len(f) == 0 {
			continue
		}
		m[f[0]] = append(m[f[0]], strings.TrimSpace(path))
	}
	return m
}

// ForProcess returns the libc mapped into process pid, from /proc/PID/maps.
// When the process sees another file system (a container), the path is
// taken through /proc/PID/root.
func ForProcess(sys System, pid int) (string, error) {
	mapsPath := fmt.Sprintf("/proc/%d/maps", pid)
	data, err := sys.ReadFile(mapsPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no process %d", pid)
		}
		return "", fmt.Errorf("reading %s: %w", mapsPath, err)
	}
	path, ino, err := LibcFromMaps(string(data))
	if err != nil {
		return "", fmt.Errorf("process %d: %w", pid, err)
	}
	if got, err := sys.Inode(path); err == nil && got == ino {
		return path, nil
	}
	root := fmt.Sprintf("/proc/%d/root%s", pid, path)
	if sys.Exists(root) {
		return root, nil
	}
	return "", fmt.Errorf("process %d maps %s (inode %d), which is not that file here: was libc upgraded since the process started? Restart it, or name the file with --libc", pid, path, ino)
}

// LibcFromMaps finds the libc mapping in /proc/PID/maps text, whose lines
// read "start-end perms offset dev inode path".
func LibcFromMaps(maps string) (path string, ino uint64, err error) {
	for _, line := range strings.Split(maps, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		p := strings.Join(f[5:], " ")
		deleted := strings.HasSuffix(p, " (deleted)")
		p = strings.TrimSuffix(p, " (deleted)")
		if !strings.HasPrefix(p, "/") || !IsLibcName(filepath.Base(p)) {
			continue
		}
		if deleted {
			return "", 0, fmt.Errorf("its libc %s was deleted (upgraded?) after it started; restart the process", p)
		}
		n, err := strconv.ParseUint(f[4], 10, 64)
		if err != nil {
			return "", 0, fmt.Errorf("bad maps line %q", line)
		}
		return p, n, nil
	}
	return "", 0, errors.New("maps no libc (statically linked?); name one with --libc")
}

// Lib is a libc opened to place probes.
type Lib struct {
	Path    string
	Machine elf.Machine
	syms    map[string]uint64 // function symbol → file offset
}

// Open reads path's function symbols (.dynsym, then .symtab when present)
// and converts their addresses to file offsets, which is what uprobes take.
func Open(sys System, path string) (*Lib, error) {
	lib, err := readELF(sys, path, funcOffsets)
	var fe *elf.FormatError
	if errors.As(err, &fe) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err != nil {
		return nil, err
	}
	if len(lib.syms) == 0 {
		return nil, fmt.Errorf("%s has no function symbols", path)
	}
	return lib, nil
}

// funcOffsets maps the function symbols of f, the ELF file at path, to file
// offsets.
func funcOffsets(f *elf.File, path string) *Lib {
	lib := &Lib{Path: path, Machine: f.Machine, syms: map[string]uint64{}}
	var syms []elf.Symbol
	if s, err := f.DynamicSymbols(); err == nil {
		syms = append(syms, s...)
	}
	if s, err := f.Symbols(); err == nil {
		syms = append(syms, s...)
	}
	for _, s := range syms {
		// Not STT_GNU_IFUNC: its address is the resolver, not the code.
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 {
			continue
		}
		name, _, _ := strings.Cut(s.Name, "@") // versioned names
		if _, dup := lib.syms[name]; dup {
			continue
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && s.Value >= p.Vaddr && s.Value < p.Vaddr+p.Memsz {
				lib.syms[name] = s.Value - p.Vaddr + p.Off
				break
			}
		}
	}
	return lib
}

// Family names the allocator family of the library's malloc.
func (l *Lib) Family() schema.Family {
	return schema.FamilyOf(func(s string) bool { _, ok := l.syms[s]; return ok })
}

// Offset returns the file offset of the first of symbols that exists.
func (l *Lib) Offset(symbols ...string) (off uint64, sym string, ok bool) {
	for _, s := range symbols {
		if off, ok := l.syms[s]; ok {
			return off, s, true
		}
	}
	return 0, "", false
}
