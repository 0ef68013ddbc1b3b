package libc

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/faultline/faultline/perfdata/schema"
)

// Allocator is the object a program's malloc binds to, and its family.
type Allocator struct {
	Path   string
	Family schema.Family
	// How says why this object: "LD_PRELOAD", "the program itself"
	// (statically linked, or it defines malloc), "needed by PROG".
	How string
	// Static: Path is a statically linked program (no loader, no
	// LD_PRELOAD).
	Static bool
}

func (a *Allocator) String() string {
	return fmt.Sprintf("%s in %s (%s)", a.Family, a.Path, a.How)
}

// maxObjects bounds the objects the search reads (a loop of DT_NEEDED
// entries, a hostile tree).
const maxObjects = 256

// defines is what the search needs to know of one object: whether it
// defines malloc, and its family when it does.
type defines struct {
	malloc bool
	family schema.Family
}

// definesMalloc reads whether f defines malloc: in .dynsym (what the
// loader binds), or for a statically linked file (static true) in
// .symtab. The family is read from both: a program linked with a static
// allocator exports malloc but keeps mallocx or tc_malloc local.
func definesMalloc(f *elf.File, static bool) defines {
	dyn := dynDefines(f)
	// .symtab is read only where it counts: a static program, or a
	// family's marks kept local (the dynamic table lacks them).
	var local map[string]bool
	symtab := func() map[string]bool {
		if local == nil {
			local = map[string]bool{}
			if syms, err := f.Symbols(); err == nil {
				for _, s := range syms {
					if definedFunc(s.Info, s.Section) {
						name, _, _ := strings.Cut(s.Name, "@")
						local[name] = true
					}
				}
			}
		}
		return local
	}
	has := func(name string) bool { return dyn(name) || symtab()[name] }
	d := defines{malloc: dyn("malloc")}
	if static {
		d.malloc = has("malloc")
	}
	if d.malloc {
		d.family = schema.FamilyOf(has)
	}
	return d
}

// FindAllocator returns the object the dynamic linker binds the
// program's malloc to, in the order of its global lookup scope: the
// program itself, then the objects of LD_PRELOAD (preload, as the
// program's environment will have it), then its DT_NEEDED libraries
// breadth first; the first that defines malloc wins (glibc
// elf/rtld.c puts preloads after the main map and before its
// dependencies). A statically linked program is its
// own allocator. A #! script's interpreter is the program.
func FindAllocator(sys System, path, preload string) (*Allocator, error) {
	path, err := followShebang(sys, path)
	if err != nil {
		return nil, err
	}
	bi, err := readELF(sys, path, dynInfo)
	if err != nil {
		return nil, fmt.Errorf("%s: not a program faultline can probe: %w", path, err)
	}
	if bi.interp == "" && len(bi.needed) == 0 {
		d, err := readELF(sys, path, func(f *elf.File, _ string) defines { return definesMalloc(f, true) })
		if err != nil {
			return nil, err
		}
		if !d.malloc {
			return nil, fmt.Errorf("%s is statically linked and has no malloc symbol (stripped?): nothing to probe", path)
		}
		return &Allocator{Path: path, Family: d.family, How: "statically linked into the program", Static: true}, nil
	}
	cache := ldCache(sys)
	try := func(p, how string) (*Allocator, error) {
		d, err := readELF(sys, p, func(f *elf.File, _ string) defines { return definesMalloc(f, false) })
		if err != nil || !d.malloc {
			return nil, err
		}
		return &Allocator{Path: canonical(p), Family: d.family, How: how}, nil
	}
	if a, err := try(path, "defined by the program itself"); err != nil || a != nil {
		if a != nil {
			a.Path = path
		}
		return a, err
	}
	// ld.so splits LD_PRELOAD at spaces and colons; a name without a
	// slash is searched for as a DT_NEEDED entry is.
	for _, name := range strings.FieldsFunc(preload, func(r rune) bool { return r == ' ' || r == ':' }) {
		p := findLib(sys, name, bi, cache)
		if p == "" {
			continue // ld.so warns and goes on
		}
		if a, _ := try(p, "LD_PRELOAD"); a != nil {
			return a, nil
		}
	}
	seen := map[string]bool{}
	type item struct{ name, by string }
	var queue []item
	for _, n := range bi.needed {
		queue = append(queue, item{n, path})
	}
	for len(queue) > 0 && len(seen) < maxObjects {
		it := queue[0]
		queue = queue[1:]
		if seen[it.name] {
			continue
		}
		seen[it.name] = true
		lib := findLib(sys, it.name, bi, cache)
		if lib == "" {
			if IsLibcName(filepath.Base(it.name)) {
				return nil, fmt.Errorf("%s needs %s but it is not in RUNPATH, LD_LIBRARY_PATH, the ld.so cache or the standard directories; name it with --libc", path, it.name)
			}
			continue
		}
		if a, _ := try(lib, "needed by "+filepath.Base(it.by)); a != nil {
			return a, nil
		}
		if dep, err := readELF(sys, lib, dynInfo); err == nil {
			for _, n := range dep.needed {
				queue = append(queue, item{n, lib})
			}
		}
	}
	return nil, fmt.Errorf("no object %s loads defines malloc (needs %s); name the allocator's library with --libc", path, strings.Join(bi.needed, ", "))
}

// ForProcessAllocator returns the allocator of running process pid: the
// program itself when it defines malloc (/proc/PID/exe), else a mapped
// library of a known non-glibc family that defines malloc (preloaded or
// needed: the process maps only what it loaded), else its libc
// (ForProcess). A mapped file is opened as the process sees it, through
// the path in its maps line, checked by inode (or through /proc/PID/root)
// as ForProcess does.
func ForProcessAllocator(sys System, pid int) (*Allocator, error) {
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	d, err := readELF(sys, exe, func(f *elf.File, _ string) defines {
		static := true
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				static = false
			}
		}
		return definesMalloc(f, static)
	})
	if err == nil && d.malloc {
		return &Allocator{Path: exe, Family: d.family, How: "defined by the program itself"}, nil
	}
	if data, err := sys.ReadFile(fmt.Sprintf("/proc/%d/maps", pid)); err == nil {
		seen := map[string]bool{}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 6 || f[4] == "0" {
				continue
			}
			p := strings.Join(f[5:], " ")
			if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") || seen[p] || IsLibcName(filepath.Base(p)) {
				continue
			}
			seen[p] = true
			ino, err := strconv.ParseUint(f[4], 10, 64)
			if err != nil {
				continue
			}
			if got, err := sys.Inode(p); err != nil || got != ino {
				root := fmt.Sprintf("/proc/%d/root%s", pid, p)
				if !sys.Exists(root) {
					continue
				}
				p = root
			}
			d, err := readELF(sys, p, func(f *elf.File, _ string) defines { return definesMalloc(f, false) })
			if err == nil && d.malloc && d.family != schema.FamilyGlibc && d.family != schema.FamilyOther {
				return &Allocator{Path: p, Family: d.family, How: "mapped by the process"}, nil
			}
		}
	}
	lib, err := ForProcess(sys, pid)
	if err != nil {
		return nil, err
	}
	return &Allocator{Path: lib, Family: schema.FamilyGlibc, How: "the process's libc"}, nil
}
