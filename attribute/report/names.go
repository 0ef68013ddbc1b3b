package report

import (
	"fmt"
	"strings"

	"github.com/faultline/faultline/perfdata/schema"
	"github.com/google/pprof/profile"
	"github.com/ianlancetaylor/demangle"
)

// functionName is the readable name pprof's own symbolizer gives a function
// (google/pprof internal/symbolizer, default demangler mode): no parameter
// lists, no template arguments, no return type. system is the linkage name
// (mangled when there is one), name the full demangled name. The full name
// stays in the profile's SystemName.
func functionName(name, system string) string {
	if strings.HasPrefix(system, "_R") {
		return rustName(name, system)
	}
	opts := []demangle.Option{demangle.NoParams, demangle.NoEnclosingParams, demangle.NoTemplateParams}
	if strings.HasPrefix(system, "_Z") {
		s, _, _ := strings.Cut(system, "@") // a symbol version is not part of the mangled name
		if d := demangle.Filter(s, opts...); d != s {
			return d
		}
	}
	// Already demangled (DWARF names, C): pprof's heuristics for names that
	// look like C++.
	if strings.Contains(name, ".<") || strings.Contains(name, "]).") || !(strings.ContainsAny(name, "<>[]") || strings.Contains(name, "::")) {
		return name
	}
	if strings.HasPrefix(name, "[") { // faultline's pseudo frames: [heap], [file] libc.so.6
		return name
	}
	return removeMatching(removeMatching(name, '(', ')'), '<', '>')
}

// rustName names a Rust function with a v0 mangled name (_R...) whole:
// "<alloc::alloc::Global>::alloc_impl", "<alloc::alloc::Global as
// core::alloc::Allocator>::allocate" — the qualified path in angle brackets
// is the function's subject, and cutting it as a template argument list
// would leave "::alloc_impl". Only a path's trailing generic arguments
// ("do_call::<...>") go, as C++ template arguments do.
func rustName(name, system string) string {
	if d := demangle.Filter(system); d != system {
		name = d
	}
	for {
		i := strings.Index(name, "::<")
		if i < 0 {
			return name
		}
		depth, end := 0, -1
		for j := i + 2; j < len(name) && end < 0; j++ {
			switch name[j] {
			case '<':
				depth++
			case '>':
				if depth--; depth == 0 {
					end = j
				}
			}
		}
		if end < 0 {
			return name
		}
		name = name[:i] + name[end+1:]
	}
}

// removeMatching removes nested instances of start..end from name, as
// pprof's symbolizer does (a mismatch leaves the name as it is).
func removeMatching(name string, start, end byte) string {
	s := string(start) + string(end)
	var nesting, first, current int
	for index := strings.IndexAny(name[current:], s); index != -1; index = strings.IndexAny(name[current:], s) {
		switch current += index; name[current] {
		case start:
			nesting++
			if nesting == 1 {
				first = current
			}
		case end:
			nesting--
			switch {
			case nesting < 0:
				return name
			case nesting == 0:
				name = name[:first] + name[current+1:]
				current = first - 1
			}
		}
		current++
	}
	return name
}

// systemIncludeDirs hold the compiler's and libc's headers: code inlined
// from them (std::vector::push_back, std::map::operator[]) is the
// library's, not the user's.
// Rust's standard library is compiled from /rustc/<commit>/library and its
// vendored dependencies (hashbrown, ...) from /rust/deps.
var systemIncludeDirs = []string{"/usr/include/", "/usr/lib/gcc/", "/usr/lib/clang/", "/usr/lib/llvm", "/usr/lib64/clang/", "/usr/local/lib/gcc/", "/rustc/", "/rust/deps/"}

// IsSystemSource reports whether a source file is a system header (the
// compiler's or libc's include directories).
func IsSystemSource(file string) bool {
	for _, d := range systemIncludeDirs {
		if strings.HasPrefix(file, d) {
			return true
		}
	}
	return false
}

// SiteFrame is one frame of a profile stack, inlined frames expanded
// (innermost first, as pprof stores a location's lines).
type SiteFrame struct {
	Loc  *profile.Location
	Line *profile.Line // nil for a location without lines
}

// name is the frame's function ("module+0xoffset" without symbols).
func (f SiteFrame) name() string {
	if f.Line == nil || f.Line.Function == nil {
		if m := f.Loc.Mapping; m != nil && m.File != "" && f.Loc.Address >= m.Start {
			return fmt.Sprintf("%s+%#x", baseName(m.File), f.Loc.Address-m.Start+m.Offset)
		}
		return fmt.Sprintf("%#x", f.Loc.Address)
	}
	if n := f.Line.Function.Name; n != "" {
		return n
	}
	if n := f.Line.Function.SystemName; n != "" {
		return n
	}
	return "[unknown]"
}

// system reports whether the frame is the system's code: in a system
// library, or inlined from a system header; without a source file, a
// std:: or __gnu_cxx:: name counts as the standard library's.
func (f SiteFrame) system() bool {
	if m := f.Loc.Mapping; m != nil && (schema.IsSystemFile(m.File) || m.File == "[stack]") {
		// A "frame" in the stack is an unwinder's misstep, not code.
		return true
	}
	if f.Line == nil || f.Line.Function == nil {
		return false
	}
	n := f.Line.Function.Name
	if goStd(n, f.Line.Function.Filename) {
		return true
	}
	if file := f.Line.Function.Filename; file != "" {
		return IsSystemSource(file)
	}
	if startupFuncs[n] || strings.HasPrefix(n, "__rust_") || strings.HasPrefix(n, "__rdl_") {
		return true
	}
	for _, p := range systemNamespaces {
		if strings.HasPrefix(n, p) || strings.HasPrefix(n, "<"+p) {
			return true
		}
	}
	return false
}

// systemNamespaces are the standard libraries' namespaces: C++'s, and
// Rust's crates std, core and alloc with std's hashbrown. They name the
// standard library's frames where no source file does.
var systemNamespaces = []string{"std::", "__gnu_cxx::", "__cxxabiv1::", "core::", "alloc::", "hashbrown::"}

// startupFuncs are the C runtime's start-up code that crt1.o and crti.o
// link into every program: they call main and the constructors, and are
// never a site of the program's.
var startupFuncs = map[string]bool{"_start": true, "_init": true, "_fini": true, "__libc_csu_init": true, "__libc_csu_fini": true, "frame_dummy": true}

// goPackage returns the package path of a Go function name
// ("internal/cpu" of "internal/cpu.doinit", "runtime" of
// "runtime.(*mheap).grow"), or "" when name does not look like one.
func goPackage(name string) string {
	slash := strings.LastIndexByte(name, '/')
	dot := strings.IndexByte(name[slash+1:], '.')
	if dot <= 0 {
		return ""
	}
	return name[:slash+1+dot]
}

// goStd reports whether a frame is Go's standard library: its package
// path's first element has no dot (github.com/... has one) and is not
// main, and its source is that package's directory of a Go tree
// (GOROOT/src/PKG/); without a source file only the runtime's own packages
// count (runtime, internal/...), as other names cannot be told from C's.
func goStd(name, file string) bool {
	pkg := goPackage(name)
	if pkg == "" || pkg == "main" || strings.Contains(strings.SplitN(pkg, "/", 2)[0], ".") {
		return false
	}
	if file == "" {
		return goRuntime(name)
	}
	return strings.Contains(file, "/src/"+pkg+"/") && (strings.HasSuffix(file, ".go") || strings.HasSuffix(file, ".s"))
}

// goRuntime reports whether a function is in Go's runtime.
func goRuntime(name string) bool {
	return strings.HasPrefix(name, "runtime.") || strings.HasPrefix(name, "internal/runtime/")
}

// allocator reports whether the frame is an allocator's: an entry point
// or a function inside one (schema.AllocatorInternal); family is whose
// when known.
func (f SiteFrame) allocator() (family schema.Family, ok bool) {
	if f.Line == nil || f.Line.Function == nil {
		return schema.FamilyOther, false
	}
	fn := f.Line.Function
	for _, n := range []string{fn.Name, fn.SystemName} {
		if fam, ok := schema.AllocatorInternal(n); ok {
			return fam, true
		}
	}
	return schema.FamilyOther, IsAllocator(fn.Name) || IsAllocator(fn.SystemName)
}

// allocatorEnd returns the index just past the stack's outermost
// allocator frame (0 when it has none) and that allocator's family. Every
// frame below it is the allocator's: the static functions between its
// named ones, and whatever its entry points called.
func allocatorEnd(frames []SiteFrame) (int, schema.Family) {
	for i := len(frames) - 1; i >= 0; i-- {
		if fam, ok := frames[i].allocator(); ok {
			return i + 1, fam
		}
	}
	return 0, schema.FamilyOther
}

// goRuntimeLeaf reports whether a stack starts in Go's runtime, past any
// system library's frames (a cgo program's runtime maps through libc): a
// mapping the runtime made is its own heap arena or metadata, shared by
// every allocation that comes later, so the allocation that happened to
// grow it is not its site.
func goRuntimeLeaf(frames []SiteFrame) bool {
	for _, f := range frames {
		if m := f.Loc.Mapping; m != nil && schema.IsSystemFile(m.File) {
			continue
		}
		return f.Line != nil && f.Line.Function != nil && goRuntime(f.Line.Function.Name)
	}
	return false
}

// AllocatorOwn reports whether a stack is the allocator's own: it runs
// through an allocator and no frame outside it is the user's (the
// allocator's start-up from a constructor, or its background work). Its
// site is then the allocator, never one of its functions: named
// "[allocator] FAMILY" ("[allocator] jemalloc"), or by the module holding
// the allocator's outermost frame when the family is not known
// ("[allocator] ld-linux-x86-64.so.2": the loader's own malloc).
func AllocatorOwn(frames []SiteFrame) (site string, ok bool) {
	if goRuntimeLeaf(frames) {
		return "[allocator] Go runtime", true
	}
	end, fam := allocatorEnd(frames)
	if end == 0 {
		return "", false
	}
	for _, f := range frames[end:] {
		if !f.system() {
			return "", false
		}
	}
	switch m := frames[end-1].Loc.Mapping; {
	case fam != schema.FamilyOther:
		return "[allocator] " + fam.String(), true
	case m != nil && m.File != "":
		return "[allocator] " + baseName(m.File), true
	}
	return "[allocator]", true
}

// String is "function file:line", or the function alone.
func (f SiteFrame) String() string {
	if f.Line != nil && f.Line.Function != nil && f.Line.Function.Filename != "" && f.Line.Line != 0 {
		return fmt.Sprintf("%s %s:%d", f.name(), baseName(f.Line.Function.Filename), f.Line.Line)
	}
	return f.name()
}

// SiteFrames expands a stack's locations into frames, leaf first.
func SiteFrames(locs []*profile.Location) []SiteFrame {
	var out []SiteFrame
	for _, l := range locs {
		if len(l.Line) == 0 {
			out = append(out, SiteFrame{Loc: l})
			continue
		}
		for i := range l.Line {
			out = append(out, SiteFrame{Loc: l, Line: &l.Line[i]})
		}
	}
	return out
}

// UserFrame finds the frame that names an allocation site: the first one
// in the user's own code, skipping system libraries, code inlined from
// system headers, and the allocator's frames (allocatorEnd: a call that
// made the allocator map memory is charged that memory, even where the
// allocator is linked into the program). via is the outermost frame
// skipped (the library function the user's code called), "" when none
// was. When every frame is the system's, the leaf names the site (i = 0).
func UserFrame(frames []SiteFrame) (i int, via string) {
	start, _ := allocatorEnd(frames)
	for i := start; i < len(frames); i++ {
		if !frames[i].system() {
			if i > 0 {
				via = frames[i-1].name()
			}
			return i, via
		}
	}
	return 0, ""
}

// siteName names an allocation site for people: by its first frame in the
// user's own code with the library function it went through, e.g.
// "app::Store::fill containers.cpp:27 (via std::vector::push_back)"; raw
// names it by its leaf frame instead.
func siteName(locs []*profile.Location, raw bool) string {
	frames := SiteFrames(locs)
	if len(frames) == 0 {
		return "[unknown]"
	}
	if raw {
		// The leaf location's outermost line: the physical function.
		n := len(locs[0].Line)
		if n == 0 {
			return frames[0].String()
		}
		return frames[n-1].String()
	}
	i, via := UserFrame(frames)
	if via != "" {
		return frames[i].String() + " (via " + via + ")"
	}
	return frames[i].String()
}

// SampleSiteName names a sample's allocation site as siteName does. In a
// profile whose leaf is already the site frame (Builder.Profile without
// RawSites) the library function it went through is the sample's via
// label; raw names the leaf location's function, as siteName does.
func SampleSiteName(s *profile.Sample, raw bool) string {
	if via := s.Label[ViaLabel]; len(via) > 0 && !raw && len(s.Location) > 0 {
		if frames := SiteFrames(s.Location[:1]); len(frames) > 0 {
			return frames[0].String() + " (via " + via[0] + ")"
		}
	}
	return siteName(s.Location, raw)
}
