package binfile

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// elfSym is one function symbol; end is exclusive.
type elfSym struct {
	start, end uint64
	name       string
	bind       elf.SymBind
	file       string // source file from the preceding STT_FILE symbol, as binutils finds it
	demangled  string // filled on first use
}

// symtab is a binary's function symbols sorted by start, one per start
// address, as perf keeps them (symbol.c: symbols__fixup_duplicate and
// symbols__fixup_end).
type symtab struct {
	syms   []elfSym
	source string // ".symtab of FILE" etc., for Binary.Describe
}

// loadSymbols reads function symbols from the first of the files' .symtab
// and then .dynsym that has any, in perf's order (the debug file's symtab
// first: dso__load takes the first candidate image with a symtab). A table
// it cannot read is passed over for the next, as perf does.
func loadSymbols(runtime *elfFile, files ...*elfFile) (st symtab) {
	var dyn *symbolSection // runtime's .dynsym, if read here
	defer func() {
		// perf adds "name@plt" symbols for the runtime image's PLT
		// (dso__synthesize_plt_symbols) whichever file the symtab came from.
		// One fixup for both: sorting is most of the cost.
		if plt := synthesizePLT(runtime, dyn); len(plt) > 0 {
			st.syms = append(st.syms, plt...)
		}
		if len(st.syms) > 0 {
			st.fixup()
		}
	}()
	for _, want := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		for _, f := range files {
			if f == nil {
				continue
			}
			syms, sect, err := readSyms(f, want, pltEntries(runtime))
			if f == runtime && want == elf.SHT_DYNSYM {
				dyn = sect
			}
			if err != nil || len(syms) == 0 {
				continue
			}
			st.syms = syms
			st.source = fmt.Sprintf("%s of %s", map[elf.SectionType]string{elf.SHT_SYMTAB: ".symtab", elf.SHT_DYNSYM: ".dynsym"}[want], f.path)
			return st
		}
	}
	return st
}

// readSyms reads f's function symbols from its section of type typ, with
// room for extra more in the slice, and returns the section read.
func readSyms(f *elfFile, typ elf.SectionType, extra int) (out []elfSym, syms *symbolSection, err error) {
	s := f.ef.SectionByType(typ)
	if s == nil || s.Type == elf.SHT_NOBITS || s.Size == 0 {
		return nil, nil, nil
	}
	defer func() {
		if p := recover(); p != nil {
			out, syms, err = nil, nil, &FormatError{Path: f.path, Msg: "reading symbols", Err: fmt.Errorf("debug/elf panicked: %v", p)}
		}
	}()
	syms, err = rawSymbols(f.ef, s)
	if err != nil {
		return nil, nil, &FormatError{Path: f.path, Msg: "reading symbols", Err: err}
	}
	out = make([]elfSym, 0, syms.n+extra)
	// binutils (elf.c elf_find_function) names the source file of a
	// symbol-only address after the STT_FILE symbol before it; a global
	// symbol after a second STT_FILE gets none.
	file, fileAfterSym, symSeen := "", false, false
	for i := 1; i < syms.n; i++ { // symbol 0 is the null symbol
		sym := syms.at(i)
		t := elf.ST_TYPE(sym.info)
		if t == elf.STT_FILE {
			file = syms.name(sym)
			if symSeen {
				fileAfterSym = true
			}
			continue
		}
		if t != elf.STT_SECTION {
			symSeen = true
		}
		// perf's elf_sym__is_function (FUNC or GNU_IFUNC) or
		// elf_sym__is_label (NOTYPE, e.g. ld.so's _start, in an
		// executable section); named and defined.
		if sym.shndx == elf.SHN_UNDEF || sym.shndx >= elf.SHN_LORESERVE || sym.value == 0 {
			continue
		}
		switch t {
		case elf.STT_FUNC, elf.STT_GNU_IFUNC:
		case elf.STT_NOTYPE:
			if int(sym.shndx) >= len(f.ef.Sections) || f.ef.Sections[sym.shndx].Flags&elf.SHF_EXECINSTR == 0 {
				continue
			}
		default:
			continue
		}
		// Names keep any version suffix (libc's .symtab has
		// "__libc_start_main@@GLIBC_2.34"), as perf prints them.
		name := syms.name(sym)
		if name == "" {
			continue
		}
		symFile := file
		if elf.ST_BIND(sym.info) != elf.STB_LOCAL && fileAfterSym || typ != elf.SHT_SYMTAB {
			symFile = ""
		}
		out = append(out, elfSym{start: sym.value, end: sym.value + sym.size, name: name, bind: elf.ST_BIND(sym.info), file: symFile})
	}
	return out, syms, nil
}

// symbolSection is a symbol table as stored, read without building an
// elf.Symbol (and a string) for each entry: debug/elf's Symbols and
// DynamicSymbols were most of the time to index cc1, whose .dynsym holds
// 29,000 symbols of which a run names a few hundred. Names are substrings
// of one copy of the string table.
type symbolSection struct {
	data  []byte
	strs  string
	n     int
	class elf.Class
	bo    binary.ByteOrder
}

// rawSym is one entry of a symbolSection.
type rawSym struct {
	name        uint32
	info        uint8
	shndx       elf.SectionIndex
	value, size uint64
}

// rawSymbols reads symbol table s and its string table, with the checks
// debug/elf's getSymbols makes.
func rawSymbols(ef *elf.File, s *elf.Section) (*symbolSection, error) {
	size := elf.Sym64Size
	if ef.Class == elf.ELFCLASS32 {
		size = elf.Sym32Size
	}
	data, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("cannot load symbol section: %w", err)
	}
	if len(data)%size != 0 {
		return nil, fmt.Errorf("length of symbol section is not a multiple of %d", size)
	}
	if s.Link == 0 || s.Link >= uint32(len(ef.Sections)) {
		return nil, fmt.Errorf("section has invalid string table link")
	}
	str, err := ef.Sections[s.Link].Data()
	if err != nil {
		return nil, fmt.Errorf("cannot load string table section: %w", err)
	}
	return &symbolSection{data: data, strs: string(str), n: len(data) / size, class: ef.Class, bo: ef.ByteOrder}, nil
}

// at returns entry i (0 is the null symbol).
func (t *symbolSection) at(i int) rawSym {
	bo := t.bo
	if t.class == elf.ELFCLASS32 {
		d := t.data[i*elf.Sym32Size:]
		return rawSym{name: bo.Uint32(d), value: uint64(bo.Uint32(d[4:])), size: uint64(bo.Uint32(d[8:])),
			info: d[12], shndx: elf.SectionIndex(bo.Uint16(d[14:]))}
	}
	d := t.data[i*elf.Sym64Size:]
	return rawSym{name: bo.Uint32(d), info: d[4], shndx: elf.SectionIndex(bo.Uint16(d[6:])),
		value: bo.Uint64(d[8:]), size: bo.Uint64(d[16:])}
}

// name is the symbol's name as debug/elf reads it: up to the NUL, "" if
// the offset or the NUL is outside the string table.
func (t *symbolSection) name(s rawSym) string {
	if int64(s.name) >= int64(len(t.strs)) {
		return ""
	}
	rest := t.strs[s.name:]
	if i := strings.IndexByte(rest, 0); i >= 0 {
		return rest[:i]
	}
	return ""
}

// sortByStart sorts syms stably by start in O(n) moves of the 80-byte
// symbols: the order comes from a radix sort of the start addresses
// (radixOrder), and the permutation is then applied in place, cycle by
// cycle: a comparison sort of the symbols themselves would dominate
// opening a binary with tens of thousands of symbols.
func sortByStart(syms []elfSym) {
	idx := radixOrder(syms)
	// Position k takes the symbol at idx[k]; a placed position is marked -1.
	for k := range idx {
		if idx[k] < 0 {
			continue
		}
		tmp, j := syms[k], k
		for {
			next := int(idx[j])
			idx[j] = -1
			if next == k {
				syms[j] = tmp
				break
			}
			syms[j] = syms[next]
			j = next
		}
	}
}

// radixOrder returns the indices of syms in stable order of start: an LSD
// radix sort, a byte per pass, skipping the bytes all starts share.
func radixOrder(syms []elfSym) []int32 {
	n := len(syms)
	keys, tmpKeys := make([]uint64, n), make([]uint64, n)
	idx, tmpIdx := make([]int32, n), make([]int32, n)
	var or, and uint64 = 0, ^uint64(0)
	for i := range syms {
		keys[i], idx[i] = syms[i].start, int32(i)
		or |= syms[i].start
		and &= syms[i].start
	}
	for shift := uint(0); shift < 64; shift += 8 {
		if (or^and)>>shift&0xff == 0 {
			continue // every key has the same byte here
		}
		var count [257]int
		for _, k := range keys {
			count[k>>shift&0xff+1]++
		}
		for b := 1; b < 257; b++ {
			count[b] += count[b-1]
		}
		for i, k := range keys {
			d := k >> shift & 0xff
			tmpKeys[count[d]], tmpIdx[count[d]] = k, idx[i]
			count[d]++
		}
		keys, tmpKeys = tmpKeys, keys
		idx, tmpIdx = tmpIdx, idx
	}
	return idx
}

// fixup sorts, keeps perf's best symbol per start address, and gives
// zero-sized symbols the extent up to the next one.
func (st *symtab) fixup() {
	s := st.syms
	sortByStart(s)
	out := s[:0]
	for _, sym := range s {
		if n := len(out); n > 0 && out[n-1].start == sym.start {
			if !betterSymbol(out[n-1], sym) {
				out[n-1] = sym
			}
			continue
		}
		out = append(out, sym)
	}
	for i := range out {
		if out[i].end == out[i].start {
			if i+1 < len(out) {
				out[i].end = out[i+1].start
			} else {
				out[i].end = (out[i].start+4095)&^4095 + 4096
			}
		}
	}
	st.syms = out
}

// betterSymbol reports whether a should be kept over b when both start at
// the same address: perf's choose_best_symbol (symbol.c). Sized over
// zero-sized, non-weak over weak, global over local, fewer leading
// underscores, longer name; else the first.
func betterSymbol(a, b elfSym) bool {
	if sa, sb := a.end > a.start, b.end > b.start; sa != sb {
		return sa
	}
	if wa, wb := a.bind == elf.STB_WEAK, b.bind == elf.STB_WEAK; wa != wb {
		return wb
	}
	if ga, gb := a.bind == elf.STB_GLOBAL, b.bind == elf.STB_GLOBAL; ga != gb {
		return ga
	}
	if ua, ub := leadingUnderscores(a.name), leadingUnderscores(b.name); ua != ub {
		return ua < ub
	}
	if len(a.name) != len(b.name) {
		return len(a.name) > len(b.name)
	}
	return true
}

func leadingUnderscores(s string) int {
	n := 0
	for n < len(s) && s[n] == '_' {
		n++
	}
	return n
}

// lookup returns the symbol containing addr, or nil.
func (st *symtab) lookup(addr uint64) *elfSym {
	s := st.syms
	i := sort.Search(len(s), func(i int) bool { return s[i].start > addr }) - 1
	for j := i; j >= 0 && j > i-4; j-- {
		if addr < s[j].end {
			return &s[j]
		}
	}
	return nil
}

func (s *elfSym) demangledName() string {
	if s.demangled == "" {
		s.demangled = demangleName(s.name)
	}
	return s.demangled
}

// demangleName demangles C++ (Itanium) and Rust names, as addr2line -C and
// perf do; anything else comes back unchanged.
func demangleName(s string) string {
	if !strings.HasPrefix(s, "_Z") && !strings.HasPrefix(s, "_R") {
		return s
	}
	// A symbol version ("@@GLIBCXX_3.4") or perf's "@plt" is not part of
	// the mangled name.
	if i := strings.IndexByte(s, '@'); i > 0 {
		return demangle.Filter(s[:i]) + s[i:]
	}
	return demangle.Filter(s)
}

// pltEntries is how many entries synthesizePLT may add for f.
func pltEntries(f *elfFile) int {
	if f == nil {
		return 0
	}
	if rel := f.ef.Section(".rela.plt"); rel != nil && rel.Size <= 1<<24 {
		return int(rel.Size / 24)
	}
	return 0
}

// synthesizePLT (dyn: f's .dynsym when the caller has read it, else nil)
// names x86-64 PLT entries as perf does: entry i (after the
// 16-byte header of .plt, or of .plt.sec when the binary has one) is
// "SYM@plt" for the i-th .rela.plt relocation's dynamic symbol, "@plt" for
// one without a symbol (IRELATIVE).
func synthesizePLT(f *elfFile, dyn *symbolSection) (out []elfSym) {
	if f == nil || f.ef.Machine != elf.EM_X86_64 || f.ef.Class != elf.ELFCLASS64 {
		return nil
	}
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	rel := f.ef.Section(".rela.plt")
	plt := f.ef.Section(".plt")
	if rel == nil || plt == nil || plt.Type == elf.SHT_NOBITS || rel.Size > 1<<24 {
		return nil
	}
	start, end := plt.Addr+16, plt.Addr+plt.Size
	if sec := f.ef.Section(".plt.sec"); sec != nil && sec.Type != elf.SHT_NOBITS {
		start, end = sec.Addr, sec.Addr+sec.Size
	}
	data, err := sectionData(rel)
	if err != nil {
		return nil
	}
	if s := f.ef.SectionByType(elf.SHT_DYNSYM); dyn == nil && s != nil && s.Type != elf.SHT_NOBITS {
		dyn, _ = rawSymbols(f.ef, s) // nil: entries without names
	}
	bo := f.ef.ByteOrder
	for off := 0; off+24 <= len(data); off += 24 {
		addr := start + uint64(off/24)*16
		if addr+16 > end {
			break
		}
		name := ""
		if idx := bo.Uint64(data[off+8:]) >> 32; dyn != nil && idx > 0 && idx < uint64(dyn.n) {
			name = dyn.name(dyn.at(int(idx)))
		}
		out = append(out, elfSym{start: addr, end: addr + 16, name: name + "@plt", bind: elf.STB_GLOBAL})
	}
	return out
}
