package cli

import (
	"debug/elf"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/cmd/faultline/internal/libc"
	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// probeGroupPrefix starts the tracefs group of every probe record adds; the
// group is probeGroupPrefix + "_" + our pid, so two runs never share probes
// and a group whose pid is gone is known to be stale. Nothing outside our
// group is ever added or removed.
const probeGroupPrefix = "faultline"

// probeGroupFor is the group of the run with process id pid.
func probeGroupFor(pid int) string { return probeGroupPrefix + "_" + strconv.Itoa(pid) }

// allocFunc is an allocator function record can probe.
type allocFunc struct {
	name    string   // event name in the group
	symbols []string // symbols to try, in order
	// entry lists the entry arguments by position; ret says whether the
	// return probe records the pointer (ptr, hdr) or only a status (ret).
	entry []string
	ret   string // "ptr", "status" or "" (no return probe)
	// families that have it (attribute.EntryPoint.For).
	ep *attribute.EntryPoint
}

// allocFuncs are the probe-able functions, attribute.EntryPoints, all
// probed by default where the allocator's family has them. calloc is
// probed as __libc_calloc in glibc: `perf probe -x libc calloc` attaches
// twice on glibc 2.36 (libc's own calloc@plt matches the name too); we
// resolve the symbol ourselves, but keep the real name so the probe is on
// the function itself. posix_memalign returns a status: its pointer is
// stored through memptr, which a return probe cannot reach (the argument
// registers are gone by then), so its calls stay unpaired for analyze.
var allocFuncs = func() []allocFunc {
	var out []allocFunc
	for i := range attribute.EntryPoints {
		e := &attribute.EntryPoints[i]
		f := allocFunc{name: e.Event, symbols: e.Symbols, entry: e.Args, ep: e}
		switch {
		case e.Role == attribute.EntryFree:
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

// canonicalProbes validates --probe values, expands "all", adds malloc
// (always probed), drops duplicates, and keeps allocFuncs order.
func canonicalProbes(in []string) ([]string, error) {
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

// probeDef is one uprobe: its event name in the group and the line written
// to uprobe_events.
type probeDef struct {
	event string
	line  string
	// sized: an allocation entry with a size argument (gets stack
	// instances); nmemb: it has nmemb too.
	sized, nmemb bool
}

// argRegs are the registers holding the first integer arguments, in the
// kernel's fetch-arg spelling, per libc machine.
var argRegs = map[elf.Machine][]string{
	elf.EM_X86_64:  {"%di", "%si", "%dx"},
	elf.EM_AARCH64: {"%x0", "%x1", "%x2"},
}

// topStackWords is how many words of the stack an allocation entry probe
// fetches from its stack pointer up (analyze.TopStackWord): enough to
// unwind through libstdc++'s operator new and its variants to the call
// site, so a call recorded without a stack still gets its exact leaf. At
// malloc's entry the site's return address is word 2 above operator
// new(size_t), word 4 above the nothrow and align_val_t variants and word
// 6 above the aligned nothrow ones, and std::string's out-of-line
// constructor (libstdc++'s _M_construct, whose _M_create tail-calls
// operator new) puts the user's return address at word 8 (libstdc++ 12,
// x86-64); 8 words reached the user's code for 92% of the calls of
// testdata/record's containers, 16 for all. The 16 words cost a fraction
// of the uprobe hit itself (the figures are in the commit that set it).
// A probe takes at most 128 fetch arguments.
const topStackWords = 16

// topStackArgs are the fetch arguments of the top of the stack at an
// x86-64 function's entry: SP, BP and n words from SP up. (On arm64 the
// return address is in x30, not on the stack; not done.)
func topStackArgs(n int) []string {
	args := []string{analyze.TopStackSP + "=%sp:u64", analyze.TopStackBP + "=%bp:u64"}
	for i := 0; i < n; i++ {
		args = append(args, fmt.Sprintf("%s=+%d(%%sp):u64", analyze.TopStackWord(i), 8*i))
	}
	return args
}

// checkTracefsString refuses a string that would change the meaning of a
// uprobe_events line: whitespace and control characters separate or end
// commands there (a newline in a library path would start a command of
// its own), and ':' separates a path from its offset.
func checkTracefsString(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	for _, c := range s {
		if unicode.IsSpace(c) || unicode.IsControl(c) || c == ':' || c > unicode.MaxASCII && !unicode.IsPrint(c) {
			return fmt.Errorf("%s %q contains %q, which the tracefs probe syntax gives a meaning to; refusing to write it to uprobe_events (copy or link the library to a plain path and pass it with --libc)", what, s, c)
		}
	}
	return nil
}

// probeDefinitions builds the uprobe_events lines for funcs in libc at path,
// in group. We write uprobe_events ourselves instead of running perf probe:
// perf 6.1's perf probe refuses an event name that exists in any group, and
// a resolved file offset attaches once where perf probe's debuginfo lookup
// attached calloc twice. Functions that are aliases of one already probed
// (aligned_alloc is memalign in glibc 2.36) are probed once; notes say so
// (as a detail for -v: nothing is missed), and name functions libc lacks.
func probeDefinitions(sys system, path, group string, funcs []string) (defs []probeDef, notes []error, err error) {
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
			case family != attribute.FamilyGlibc:
				// Not every allocator has glibc's extensions.
				notes = append(notes, &detailNote{fmt.Errorf("%s (%s) has no %s; not probing it", path, family, name)})
			default:
				notes = append(notes, fmt.Errorf("%s has no %s; not probing it", path, name))
			}
			continue
		}
		if prev, dup := byOffset[off]; dup {
			notes = append(notes, &detailNote{fmt.Errorf("%s is the same function as %s in %s; probed once, as %s:%s", name, prev, path, group, prev)})
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
			args = append(args, topStackArgs(topStackWords)...)
		}
		defs = append(defs, probeDef{event: fn.name, sized: sized, nmemb: nmemb,
			line: fmt.Sprintf("p:%s/%s %s %s", group, fn.name, loc, strings.Join(args, " "))})
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
			defs = append(defs, probeDef{event: fn.name + "__return",
				line: fmt.Sprintf("r:%s/%s__return %s ptr=$retval%s", group, fn.name, loc, hdr)})
		case "status":
			defs = append(defs, probeDef{event: fn.name + "__return",
				line: fmt.Sprintf("r:%s/%s__return %s ret=$retval:s32", group, fn.name, loc)})
		}
	}
	return defs, notes, nil
}

// removeStale removes the probes of earlier runs that were killed before
// they could clean up: groups faultline_PID whose process is gone. Groups
// of runs still alive, and every other group, are left alone.
func (r *recorder) removeStale() error {
	events := filepath.Join(r.tracefs, "uprobe_events")
	data, err := r.sys.ReadFile(events)
	if err != nil {
		return prereqError("reading %s: %v", events, err)
	}
	stale := map[string][]string{}
	for group, evs := range probeGroups(string(data)) {
		pidStr, ok := strings.CutPrefix(group, probeGroupPrefix+"_")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		// Our own pid can only be a dead run's whose pid was reused.
		if pid != r.sys.Getpid() && r.sys.ProcessAlive(pid) {
			continue
		}
		stale[group] = evs
	}
	var groups []string
	for g := range stale {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		for _, ev := range stale[g] {
			if err := r.writeEvents("-:" + g + "/" + ev); err != nil && !errors.Is(err, syscall.ENOENT) {
				if errors.Is(err, syscall.EBUSY) {
					r.logf("stale probe %s:%s is in use; left alone", g, ev)
					continue
				}
				return prereqError("removing stale probe %s:%s: %v", g, ev, err)
			}
		}
		r.logf("removed the probes of %s, left by a run that was killed (%s)", g, strings.Join(stale[g], ", "))
	}
	return nil
}

// probeGroups maps each group in uprobe_events text to its events; lines
// read "p:GROUP/EVENT PATH:OFFSET ARGS" or "r:GROUP/EVENT ...".
func probeGroups(uprobeEvents string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(uprobeEvents, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		_, name, ok := strings.Cut(f[0], ":")
		if !ok {
			continue
		}
		if g, ev, ok := strings.Cut(name, "/"); ok {
			out[g] = append(out[g], ev)
		}
	}
	return out
}

// writeEvents writes one validated line to uprobe_events.
func (r *recorder) writeEvents(line string) error {
	for _, c := range line {
		if unicode.IsControl(c) {
			return fmt.Errorf("refusing to write %q to uprobe_events: it contains a control character", line)
		}
	}
	return r.sys.AppendLine(filepath.Join(r.tracefs, "uprobe_events"), line)
}

func (r *recorder) addProbes(probes []probeDef) error {
	for _, p := range probes {
		if err := r.writeEvents(p.line); err != nil {
			return prereqError("adding probe %s:%s (%q to %s/uprobe_events): %v", r.group, p.event, p.line, r.tracefs, err)
		}
		r.added = append(r.added, p.event)
	}
	return nil
}

// probeEvents reads the id and format of each probe from tracefs.
func (r *recorder) probeEvents(probes []probeDef) ([]rec.Probe, error) {
	var out []rec.Probe
	for _, p := range probes {
		dir := filepath.Join(r.tracefs, "events", r.group, p.event)
		idText, err := r.sys.ReadFile(filepath.Join(dir, "id"))
		if err != nil {
			return nil, prereqError("probe %s:%s has no id in tracefs (%v): was it removed?", r.group, p.event, err)
		}
		id, err := strconv.ParseUint(strings.TrimSpace(string(idText)), 10, 64)
		if err != nil {
			return nil, prereqError("probe %s:%s: bad id %q", r.group, p.event, idText)
		}
		format, err := r.sys.ReadFile(filepath.Join(dir, "format"))
		if err != nil {
			return nil, prereqError("probe %s:%s: reading its format: %v", r.group, p.event, err)
		}
		out = append(out, rec.Probe{Event: p.event, ID: id, Format: format, Sized: p.sized, HasNmemb: p.nmemb})
	}
	return out, nil
}

// missingProbes lists the probes of this run that are no longer in
// uprobe_events (someone removed them while we recorded). uprobe_events is
// a seq_file read in pages: while another run removes its probes, a read
// can skip lines that are still there (the file shifts under the reader's
// offset). So a probe counts as missing only when no one of a few reads,
// apart in time, lists it.
func (r *recorder) missingProbes() []string {
	have := map[string]bool{}
	events := filepath.Join(r.tracefs, "uprobe_events")
	for try := 0; try < 4; try++ {
		if try > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if data, err := r.sys.ReadFile(events); err == nil {
			for _, ev := range probeGroups(string(data))[r.group] {
				have[ev] = true
			}
		}
		if len(have) == len(r.added) {
			break
		}
	}
	var missing []string
	for _, ev := range r.added {
		if !have[ev] {
			missing = append(missing, r.group+":"+ev)
		}
	}
	return missing
}

// removeProbes removes the probes this run added, newest first. It runs
// again harmlessly from the deferred call.
func (r *recorder) removeProbes() {
	for i := len(r.added) - 1; i >= 0; i-- {
		ev := r.added[i]
		var err error
		// Closing the events releases the probes; allow the kernel a moment.
		for try := 0; try < 20; try++ {
			if err = r.writeEvents("-:" + r.group + "/" + ev); !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			r.notes.add(fmt.Errorf("could not remove probe %s:%s: %v; remove it with: echo '-:%s/%s' >> %s/uprobe_events", r.group, ev, err, r.group, ev, r.tracefs))
		}
	}
	r.added = nil
}
