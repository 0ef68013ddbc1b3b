package inject

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// mapping is a line of /proc/PID/maps.
type mapping struct {
	lo, hi uint64
	perms  string
	off    uint64
	path   string
}

// readMaps reads /proc/PID/maps.
func readMaps(pid int) ([]mapping, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(fs[0], "-")
		if !ok {
			continue
		}
		var m mapping
		var e1, e2, e3 error
		m.lo, e1 = strconv.ParseUint(lo, 16, 64)
		m.hi, e2 = strconv.ParseUint(hi, 16, 64)
		m.off, e3 = strconv.ParseUint(fs[2], 16, 64)
		if e1 != nil || e2 != nil || e3 != nil {
			continue
		}
		m.perms = fs[1]
		if len(fs) >= 6 {
			m.path = strings.Join(fs[5:], " ")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// object is an ELF file mapped into the target: its load bias and its
// dynamic symbols.
type object struct {
	path string // as the target's maps name it
	bias uint64
	text []addrRange // its executable mappings
	syms []elf.Symbol
	// interp: the file asks for a dynamic loader (PT_INTERP).
	interp bool
	// gap: 16-byte aligned room for gapCode past the end of an
	// executable segment, in its last page; 0 if none has room.
	gap uint64
}

type addrRange struct{ lo, hi uint64 }

func (r addrRange) contains(a uint64) bool { return a >= r.lo && a < r.hi }

// openObject reads the object mapped at path in pid's maps, through
// /proc/PID/root (the target's own view of its files).
func openObject(pid int, maps []mapping, path string) (*object, error) {
	o := &object{path: path}
	base, found := uint64(0), false
	for _, m := range maps {
		if m.path != path {
			continue
		}
		if m.off == 0 && !found {
			base, found = m.lo, true
		}
		if strings.Contains(m.perms, "x") {
			o.text = append(o.text, addrRange{m.lo, m.hi})
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: not mapped from its start", path)
	}
	f, err := openELF(filepath.Join("/proc", strconv.Itoa(pid), "root", path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	first := true
	for _, p := range f.Progs {
		switch {
		case p.Type == elf.PT_LOAD && first:
			o.bias = base - p.Vaddr&^(pageSize-1)
			first = false
		case p.Type == elf.PT_INTERP:
			o.interp = true
		}
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 || o.gap != 0 {
			continue
		}
		end := o.bias + p.Vaddr + max(p.Filesz, p.Memsz)
		at := (end + 15) &^ 15
		if at+uint64(len(gapCode)) <= (end+pageSize-1)&^(pageSize-1) &&
			slices.ContainsFunc(o.text, func(r addrRange) bool { return r.contains(at) && r.contains(at+uint64(len(gapCode))-1) }) {
			o.gap = at
		}
	}
	o.syms, err = f.DynamicSymbols()
	if err != nil && err != elf.ErrNoSymbols {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// openELF opens an ELF file; debug/elf can panic on a hostile file.
func openELF(path string) (f *elf.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("%s: malformed ELF file (%v)", path, r)
		}
	}()
	return elf.Open(path)
}

const pageSize = 4096

// symbol returns the address of the defined function name in o, or 0.
func (o *object) symbol(name string) uint64 {
	for _, s := range o.syms {
		if s.Name == name && s.Section != elf.SHN_UNDEF && s.Value != 0 {
			return o.bias + s.Value
		}
	}
	return 0
}

// region returns the code that holds the defined functions named and
// whatever unexported code lies between them and the neighbouring
// exported functions: a translation unit's static functions (malloc's
// _int_malloc, say) sit there, and the dynamic symbols do not name them.
func (o *object) region(names ...string) addrRange {
	in := func(n string) bool {
		for _, x := range names {
			if n == x {
				return true
			}
		}
		return false
	}
	var lo, hi uint64
	for _, s := range o.syms {
		if s.Section != elf.SHN_UNDEF && s.Value != 0 && in(s.Name) {
			if lo == 0 || s.Value < lo {
				lo = s.Value
			}
			hi = max(hi, s.Value+max(s.Size, 1))
		}
	}
	if lo == 0 {
		return addrRange{}
	}
	r := addrRange{lo: 0, hi: ^uint64(0)}
	for _, s := range o.syms {
		if s.Section == elf.SHN_UNDEF || s.Value == 0 || elf.ST_TYPE(s.Info) != elf.STT_FUNC || in(s.Name) {
			continue
		}
		if end := s.Value + s.Size; s.Value < lo && end > r.lo {
			r.lo = min(end, lo)
		}
		if s.Value >= hi && s.Value < r.hi {
			r.hi = s.Value
		}
	}
	if r.hi == ^uint64(0) {
		r.hi = hi
	}
	return addrRange{o.bias + r.lo, o.bias + r.hi}
}
