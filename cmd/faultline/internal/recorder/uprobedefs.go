package recorder

import (
	"debug/elf"
	"errors"
	"fmt"
	"strings"

	"github.com/faultline/faultline/cmd/faultline/internal/libc"
	"github.com/faultline/faultline/cmd/faultline/internal/recorder/internal/tracefs"
	"github.com/faultline/faultline/perfdata/schema"
)

// allocFunc is an allocator function record can probe.
type allocFunc struct {
	name    string   // event name in the group
	symbols []string // symbols to try, in order
	// entry lists the entry arguments by position; ret says whether the
	// return probe records the pointer (ptr, hdr) or only a status (ret).
	entry []string
	ret   string // "ptr", "status" or "" (no return probe)
	// families that have it (schema.EntryPoint.For).
	ep *schema.EntryPoint
}

// allocFuncs are the probe-able functions, schema.EntryPoints, all
// probed by default where the allocator's family has them. calloc is
// probed as __libc_calloc in glibc: `perf probe -x libc calloc` attaches
// twice on glibc 2.36 (libc's own calloc@plt matches the name too); we
// resolve the symbol ourselves, but keep the real name so the probe is on
// the function itself. posix_memalign returns a status: its pointer is
// stored through memptr, which a return probe cannot reach (the argument
// registers are gone by then), so its calls stay unpaired for analyze.
var allocFuncs = func() []allocFunc {
	var out []allocFunc
	for i := range schema.EntryPoints {
		e := &schema.EntryPoints[i]
		f := allocFunc{name: e.Event, symbols: e.Symbols, entry: e.Args, ep: e}
		switch {
		case e.Role == schema.EntryFree:
		case e.Status:
			f.ret = "status"
		default:
			f.ret = "ptr"
		}
		out = append(out, f)
	}
	return out
}()

func lookupAllocFunc(name string) *allocFunc {
	for i := range allocFuncs {
		if allocFuncs[i].name == name {
			return &allocFuncs[i]
		}
	}
	return nil
}

// CanonicalProbes validates the names of functions to probe (record's
// --probe), expands "all", adds malloc (always probed), drops duplicates,
// and keeps allocFuncs' order.
func CanonicalProbes(in []string) ([]string, error) {
	want := map[string]bool{"malloc": true}
	for _, p := range in {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
		case p == "all":
			for _, f := range allocFuncs {
				want[f.name] = true
			}
		case p == "__libc_calloc":
			want["calloc"] = true
		case lookupAllocFunc(p) != nil:
			want[p] = true
		default:
			var names []string
			for _, f := range allocFuncs {
				if len(f.ep.Families) == 0 {
					names = append(names, f.name)
				}
			}
			return nil, fmt.Errorf("unknown function %q (want %s, an allocator's own such as mallocx, tc_new, mi_zalloc or op_new, or all)", p, strings.Join(names, ", "))
		}
	}
	var out []string
	for _, f := range allocFuncs {
		if want[f.name] {
			out = append(out, f.name)
		}
	}
	return out, nil
}

// argRegs are the registers holding the first integer arguments, in the
// kernel's fetch-arg spelling, per libc machine.
var argRegs = map[elf.Machine][]string{
	elf.EM_X86_64:  {"%di", "%si", "%dx"},
	elf.EM_AARCH64: {"%x0", "%x1", "%x2"},
}

// TopStackWords is how many words of the stack an allocation entry probe
// fetches from its stack pointer up (schema.TopStackWord): enough to
// unwind through libstdc++'s operator new and its variants to the call
// site, so a call recorded without a stack still gets its exact leaf. At
// malloc's entry the site's return address is word 2 above operator
// new(size_t), word 4 above the nothrow and align_val_t variants and word
// 6 above the aligned nothrow ones, and std::string's out-of-line
// constructor (libstdc++'s _M_construct, whose _M_create tail-calls
// operator new) puts the user's return address at word 8 (libstdc++ 12,
// x86-64); 16 reach the user's code for every call of testdata/record's
// containers (docs/performance.md). A probe takes at most 128 fetch
// arguments.
const TopStackWords = 16

// topStackArgs are the fetch arguments of the top of the stack at an
// x86-64 function's entry: SP, BP and n words from SP up. (On arm64 the
// return address is in x30, not on the stack; not done.)
func topStackArgs(n int) []string {
	args := []string{schema.TopStackSP + "=%sp:u64", schema.TopStackBP + "=%bp:u64"}
	for i := 0; i < n; i++ {
		args = append(args, fmt.Sprintf("%s=+%d(%%sp):u64", schema.TopStackWord(i), 8*i))
	}
	return args
}

// checkTracefsString is tracefs.CheckString with what to do about it.
func checkTracefsString(what, s string) error {
	if err := tracefs.CheckString(what, s); err != nil {
		return fmt.Errorf("%w (copy or link the library to a plain path and pass it with --libc)", err)
	}
	return nil
}

// LibrarySystem is the file access UprobeDefinitions needs: libc.System to
// read the library, and whether a path is a regular file.
type LibrarySystem interface {
	libc.System
	// IsRegular reports whether path (symlinks followed) is a regular file.
	IsRegular(path string) (bool, error)
}

// DetailNote is a warning that asks nothing of the user (an allocator
// function that is another's alias, probed once): record says it only
// with -v.
type DetailNote struct{ Err error }

func (d *DetailNote) Error() string { return d.Err.Error() }
func (d *DetailNote) Unwrap() error { return d.Err }

// UprobeDefinitions builds the uprobe_events lines for funcs
// (CanonicalProbes' names) in the allocator at path, in group. We write uprobe_events ourselves instead of running perf probe:
// perf 6.1's perf probe refuses an event name that exists in any group, and
// a resolved file offset attaches once where perf probe's debuginfo lookup
// attached calloc twice. Functions that are aliases of one already probed
// (aligned_alloc is memalign in glibc 2.36) are probed once; notes say so
// (as a *DetailNote: nothing is missed), and name functions libc lacks.
// The path and group are refused when they would change the lines'
// meaning (tracefs.CheckString).
func UprobeDefinitions(sys LibrarySystem, path, group string, funcs []string) (defs []UprobeDef, notes []error, err error) {
	if err := checkTracefsString("library path", path); err != nil {
		return nil, nil, err
	}
	if err := checkTracefsString("probe group", group); err != nil {
		return nil, nil, err
	}
	if ok, err := sys.IsRegular(path); err != nil || !ok {
		if err == nil {
			err = errors.New("not a regular file")
		}
		return nil, nil, fmt.Errorf("library %s: %v; uprobes go on a regular ELF file", path, err)
	}
	lib, err := libc.Open(sys, path)
	if err != nil {
		return nil, nil, err
	}
	regs, ok := argRegs[lib.Machine]
	if !ok {
		return nil, nil, fmt.Errorf("%s is for %v; record knows the argument registers of x86-64 and arm64 only", path, lib.Machine)
	}
	family := lib.Family()
	byOffset := map[uint64]string{}
	for _, name := range funcs {
		fn := lookupAllocFunc(name)
		if !fn.ep.For(family) {
			continue
		}
		off, _, ok := lib.Offset(fn.symbols...)
		if !ok {
			if name == "malloc" {
				return nil, nil, fmt.Errorf("%s has no malloc symbol; is it a C library?", path)
			}
			switch {
			case len(fn.ep.Families) > 0:
			case family != schema.FamilyGlibc:
				// Not every allocator has glibc's extensions.
				notes = append(notes, &DetailNote{fmt.Errorf("%s (%s) has no %s; not probing it", path, family, name)})
			default:
				notes = append(notes, fmt.Errorf("%s has no %s; not probing it", path, name))
			}
			continue
		}
		if prev, dup := byOffset[off]; dup {
			notes = append(notes, &DetailNote{fmt.Errorf("%s is the same function as %s in %s; probed once, as %s:%s", name, prev, path, group, prev)})
			continue
		}
		byOffset[off] = name
		loc := fmt.Sprintf("%s:%#x", path, off)
		var args []string
		sized, nmemb := false, false
		for i, a := range fn.entry {
			args = append(args, fmt.Sprintf("%s=%s:u64", a, regs[i]))
			sized = sized || a == "size"
			nmemb = nmemb || a == "nmemb"
		}
		if sized && lib.Machine == elf.EM_X86_64 {
			args = append(args, topStackArgs(TopStackWords)...)
		}
		defs = append(defs, UprobeDef{Event: fn.name, Sized: sized, HasNmemb: nmemb,
			Line: fmt.Sprintf("p:%s/%s %s %s", group, fn.name, loc, strings.Join(args, " "))})
		switch fn.ret {
		case "ptr":
			// hdr is the malloc chunk header in front of the pointer: its
			// size (hdr &^ 7) and IS_MMAPPED bit (0x2), glibc malloc.c's
			// mchunk_size. Other allocators keep no header there: hdr is
			// then the immediate 0, which analyze reads as "no header"
			// (a glibc chunk's size is never 0), as the in-process
			// shim's.
			hdr := ` hdr=\0:u64`
			if family.HasChunkHeader() {
				hdr = " hdr=-8($retval):u64"
			}
			defs = append(defs, UprobeDef{Event: fn.name + schema.ReturnSuffix,
				Line: fmt.Sprintf("r:%s/%s__return %s ptr=$retval%s", group, fn.name, loc, hdr)})
		case "status":
			defs = append(defs, UprobeDef{Event: fn.name + schema.ReturnSuffix,
				Line: fmt.Sprintf("r:%s/%s__return %s ret=$retval:s32", group, fn.name, loc)})
		}
	}
	return defs, notes, nil
}
