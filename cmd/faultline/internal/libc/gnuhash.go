package libc

import (
	"debug/elf"
	"encoding/binary"
	"strings"
)

// dynDefines returns a lookup of the functions f defines in its dynamic
// symbol table (what the loader binds): through the GNU hash table
// (.gnu.hash), which finds a name without reading the other symbols —
// a C library has thousands — or, without one, from every dynamic
// symbol. A table that is malformed finds nothing.
func dynDefines(f *elf.File) func(name string) bool {
	if look, ok := gnuHashLookup(f); ok {
		return look
	}
	have := map[string]bool{}
	if syms, err := f.DynamicSymbols(); err == nil {
		for _, s := range syms {
			if definedFunc(s.Info, s.Section) {
				name, _, _ := strings.Cut(s.Name, "@")
				have[name] = true
			}
		}
	}
	return func(name string) bool { return have[name] }
}

// definedFunc reports whether a symbol of this info and section index is
// a function (or an indirect one) the object defines.
func definedFunc(info byte, section elf.SectionIndex) bool {
	t := elf.ST_TYPE(info)
	return section != elf.SHN_UNDEF && (t == elf.STT_FUNC || t == elf.STT_GNU_IFUNC)
}

// gnuHash is the hash of the GNU hash table (the ELF gABI extension
// documented with glibc's elf/dl-lookup.c): h = h*33 + c from 5381.
func gnuHash(name string) uint32 {
	h := uint32(5381)
	for i := 0; i < len(name); i++ {
		h = h*33 + uint32(name[i])
	}
	return h
}

// gnuHashLookup builds the lookup on f's .gnu.hash, .dynsym and .dynstr.
// The table is a header (nbuckets, symoffset, bloom words, bloom shift),
// the bloom filter (words of the class's size), nbuckets bucket indexes
// into .dynsym, and one chain word per symbol from symoffset on, holding
// the symbol's hash with bit 0 marking the last of its bucket. Only the
// table is read whole: a lookup reads the symbols its chain names and
// their names, some hundred bytes where a C++ library's symbols and
// names are hundreds of kilobytes.
func gnuHashLookup(f *elf.File) (func(string) bool, bool) {
	hs, sym, str := f.Section(".gnu.hash"), f.Section(".dynsym"), f.Section(".dynstr")
	if hs == nil || sym == nil || str == nil || sym.Type == elf.SHT_NOBITS || str.Type == elf.SHT_NOBITS {
		return nil, false
	}
	h, err := hs.Data()
	if err != nil {
		return nil, false
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if f.Data == elf.ELFDATA2MSB {
		bo = binary.BigEndian
	}
	word, symSize := 8, 24 // Elf64_Sym
	if f.Class == elf.ELFCLASS32 {
		word, symSize = 4, 16 // Elf32_Sym
	}
	if len(h) < 16 {
		return nil, false
	}
	nbuckets, symoffset, bloom := uint64(bo.Uint32(h)), uint64(bo.Uint32(h[4:])), uint64(bo.Uint32(h[8:]))
	buckets := 16 + bloom*uint64(word)
	chains := buckets + 4*nbuckets
	if nbuckets == 0 || chains > uint64(len(h)) {
		return nil, false
	}
	nsyms := sym.Size / uint64(symSize)
	var buf [24]byte
	// is reports whether symbol i is a function named name that f
	// defines.
	is := func(i uint64, name string) bool {
		s := buf[:symSize]
		if _, err := sym.ReadAt(s, int64(i)*int64(symSize)); err != nil {
			return false
		}
		var info byte
		var shndx uint16
		if f.Class == elf.ELFCLASS32 {
			info, shndx = s[12], bo.Uint16(s[14:])
		} else {
			info, shndx = s[4], bo.Uint16(s[6:])
		}
		if !definedFunc(info, elf.SectionIndex(shndx)) {
			return false
		}
		off := uint64(bo.Uint32(s))
		if off >= str.Size || uint64(len(name)) >= str.Size-off {
			return false
		}
		got := make([]byte, len(name)+1)
		if _, err := str.ReadAt(got, int64(off)); err != nil {
			return false
		}
		return string(got[:len(name)]) == name && got[len(name)] == 0
	}
	look := func(name string) bool {
		hash := gnuHash(name)
		i := uint64(bo.Uint32(h[buckets+4*(uint64(hash)%nbuckets):]))
		if i < symoffset {
			return false
		}
		for ; i < nsyms; i++ {
			c := chains + 4*(i-symoffset)
			if c+4 > uint64(len(h)) {
				return false
			}
			ch := bo.Uint32(h[c:])
			if ch|1 == hash|1 && is(i, name) {
				return true
			}
			if ch&1 != 0 {
				return false
			}
		}
		return false
	}
	return look, true
}
