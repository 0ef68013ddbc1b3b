// Package binfile finds the binaries and debug files behind a perf
// recording's mappings, the way perf does, and names the code addresses in
// them: function (demangled), inline chain and file:line, from DWARF
// (versions 4 and 5) and ELF symbols.
//
// # Finding files
//
// A Locator searches, for a recorded path such as
// /usr/lib/x86_64-linux-gnu/libc.so.6 and the build ID the recording holds
// for it (perf's order, tools/perf/util/symbol.c dso__load and dso.c
// dso__read_binary_type_filename):
//
//	the binary:
//	  BuildIDDir/.build-id/xx/<rest>       (old cache layout: the link is the file)
//	  BuildIDDir/.build-id/xx/<rest>/elf   (perf's build-id cache, ~/.debug; [vdso]: .../vdso)
//	  Symfs/<path>, Symfs/<basename>       (--symfs; only when set)
//	  <path>                               (without Symfs, or with HostFallback)
//	its debug file, unless the binary carries DWARF itself:
//	  .gnu_debuglink: <bindir>/<link>, <bindir>/.debug/<link>, DebugDir/<dir>/<link>  (build ID, size, CRC32 checked)
//	  BuildIDDir/.build-id/xx/<rest>/debug
//	  DebugDir/.build-id/xx/<rest>.debug   (Debian's libc6-dbg, -dbgsym packages)
//	  DebugDir/<path>.debug, DebugDir/<path>
//	  DebuginfodCache/<bid>/debuginfo      (what debuginfod-find already fetched)
//
// where every DebugDir is tried under Symfs, and outside it only without
// Symfs or with HostFallback (--symfs-fallback): a recording names the
// paths, so with a symfs nothing of this machine's is read unless asked
// for, and recorded paths are cleaned so none climbs out of the symfs.
// The session leaves the default BuildIDDir and DebuginfodCache (this
// machine's) out too. DWARF is charged against a DWARFBudget before it is
// decompressed. A file whose build ID
// differs from the recording's (without build IDs: whose inode, inode
// generation or size contradicts the MMAP2 record) is passed over for a
// later candidate; if only such files exist, Open returns a
// *MismatchError, as perf refuses them, unless Locator.AllowMismatch lets
// it use the first with a warning. A debug file missing locally is
// fetched by build ID from debuginfod servers when Locator.Debuginfod is
// set (DEBUGINFOD_URLS). Names that are not files ([stack],
// [heap], //anon, [uprobes], …; see IsFileMapping) give ErrNotFile; a
// missing binary gives *NotFoundError listing every path tried and how to
// fix it; a missing debug file is a warning, a *NoDebugInfoError saying
// what would fix it.
//
// # Use
//
//	loc := binfile.NewLocator(symfsFlag, os.Getenv) // perf's defaults (~/.debug, /usr/lib/debug, debuginfod cache)
//	loc.BuildIDDir = buildIDDirFlag                 // if --buildid-dir was given
//	cache := binfile.NewCache(loc)
//	defer cache.Close()
//
//	// per sample frame in a user mapping (from MMAP2: filename, build ID or maj/min/ino, start, pgoff):
//	b, err := cache.Open(binfile.Key{Path: filename, BuildID: bid})
//	switch {
//	case errors.Is(err, binfile.ErrNotFile): // print [unknown]
//	case err != nil:                         // report once (the Cache remembers), print [unknown]
//	}
//	for _, w := range b.Warnings { … }       // report once per Binary
//	vaddr, ok := b.MappedVaddr(pc, start, pgoff)
//	frames := b.Symbolize(vaddr, frames[:0])     // innermost first; cache per (binary, vaddr)
//	for _, f := range frames {
//		// f.Func ("[unknown]" if nothing names it), f.File, f.Line, f.Inlined,
//		// f.Symbol+f.SymOffset for perf-style "sym+0x12"
//	}
//
//	// kernel addresses: names from a /proc/kallsyms copy, else "[kernel]"
//	ks, err := binfile.ParseKallsyms(f) // ks may stay nil
//	frames = ks.Symbolize(pc, frames[:0])
//
// perf names return addresses (every callchain entry but the sampled IP)
// as they are, so pass them unchanged to print what perf script prints;
// pass pc-1 instead to name the call instruction (addr2line's convention:
// the right line, and the right function after a noreturn call at a
// function's end).
//
// To print like perf script (inline frames on): for each address, the
// frames with Inlined set as "Func (inlined)", then the last frame as
// Symbol (perf's ELF name, e.g. "malloc" where DWARF says
// "__libc_malloc"; Unknown if empty) with the DSO. Func is addr2line's
// name (DWARF), Symbol perf's.
//
// For unwinding, Binary.ELF is the binary (.eh_frame, .eh_frame_hdr, program
// headers) and Binary.DebugELF the file holding DWARF (.debug_frame); in a
// separate debug file code sections are SHT_NOBITS, and its addresses
// equal the binary's.
//
// # Symbolizing
//
// The compile units of the DWARF are indexed by address when a Binary is
// opened, from .debug_aranges when the file has it (else from every
// unit's own ranges); the functions, inline trees and line table of a unit
// are read the first time an address inside it is asked for, from the
// unit alone. Opening reads only headers: the symbol table is built and
// the debug sections are inflated in the background (two goroutines for
// all binaries, in the order they were opened), and Symbolize waits for
// what it needs or reads it itself, so unwinding (which needs only program
// headers and CFI) does not wait for naming. Cache.WaitLoaded waits for the
// background, for measurements. Names follow
// DW_AT_abstract_origin and DW_AT_specification, preferring the linkage
// name (demangled: C++ and Rust) like addr2line -f -C; each inlined level's
// caller line comes from DW_AT_call_file/DW_AT_call_line, like
// addr2line -i. Addresses without a DWARF function are named from .symtab
// (the debug file's first, as perf takes the first image with a symtab),
// else .dynsym, plus perf's synthesized "name@plt" entries for the PLT,
// keeping perf's choice among aliases (choose_best_symbol:
// sized, non-weak, global, fewest leading underscores, longest name) and
// respecting symbol sizes (alignment padding is [unknown], where addr2line
// names the preceding symbol).
//
// Agreement with addr2line, llvm-symbolizer, readelf and perf script is
// measured by this package's tests (addr2line_test.go, libc_test.go,
// perfscript_test.go), which log the figures: names and inline chains
// equal theirs except where the tests document the other tool as wrong.
//
// Not done: dwz multifile DWARF (.gnu_debugaltlink, DW_FORM_GNU_ref_alt, as
// Fedora ships) is unreadable by debug/dwarf and falls back to ELF symbols;
// PLT entries are synthesized for x86-64 only; JIT (perf-PID.map) frames
// are not handled here; nothing is downloaded from debuginfod servers.
package binfile
