package binfile

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// DWARFBudget bounds the DWARF bytes loaded (after decompression): per
// binary and for all binaries a Cache holds at once. Compressed sections
// are charged by the size their headers claim before anything is
// inflated, so a zlib bomb costs nothing but its check. Share one budget
// between Locators by pointer; the zero value uses the defaults.
type DWARFBudget struct {
	PerBinary int64 // 0: DefaultDWARFPerBinary
	Total     int64 // 0: DefaultDWARFTotal

	mu   sync.Mutex
	used int64
}

// Defaults for DWARFBudget. A large C++ program's DWARF is a few hundred
// MB; libc's 15 MB.
const (
	DefaultDWARFPerBinary = 1 << 30
	DefaultDWARFTotal     = 2 << 30
)

// maxInflateRatio bounds how much a compressed debug section may claim to
// expand. zlib shrinks real DWARF 3-6×; a bomb claims up to 1032×.
const maxInflateRatio = 100

func (d *DWARFBudget) perBinary() int64 {
	if d == nil || d.PerBinary <= 0 {
		return DefaultDWARFPerBinary
	}
	return d.PerBinary
}

// reserve charges n bytes against the total, or says why it cannot.
func (d *DWARFBudget) reserve(n int64) error {
	if d == nil {
		return nil
	}
	total := d.Total
	if total <= 0 {
		total = DefaultDWARFTotal
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.used+n > total {
		return fmt.Errorf("its %d MiB of DWARF would take the DWARF of all binaries past %d MiB", n>>20, total>>20)
	}
	d.used += n
	return nil
}

// release returns what reserve charged.
func (d *DWARFBudget) release(n int64) {
	if d == nil || n == 0 {
		return
	}
	d.mu.Lock()
	d.used -= n
	d.mu.Unlock()
}

// sectionClaim is what loading one debug section costs and where its
// bytes lie in the file.
type sectionClaim struct {
	name       string
	size       int64 // bytes once loaded (decompressed)
	off, fsize uint64
	compressed bool
}

// dwarfCost checks the debug sections of f that want selects (all
// .debug_* and .zdebug_* sections when want is nil) before any is read:
// compressed sections may not claim more than maxInflateRatio times their
// stored size, nor share stored bytes with another section (six sections
// pointing at one zlib blob), and together they must fit perBinary. It
// returns the bytes loading them takes.
func dwarfCost(f *elf.File, want func(name string) bool, perBinary int64) (int64, error) {
	var claims []sectionClaim
	for _, s := range f.Sections {
		if !strings.HasPrefix(s.Name, ".debug_") && !strings.HasPrefix(s.Name, ".zdebug_") || s.Type == elf.SHT_NOBITS {
			continue
		}
		if want != nil && !want(s.Name) {
			continue
		}
		c := sectionClaim{name: s.Name, size: int64(s.Size), off: s.Offset, fsize: s.FileSize, compressed: s.Flags&elf.SHF_COMPRESSED != 0}
		if strings.HasPrefix(s.Name, ".zdebug_") {
			// Legacy GNU compression: "ZLIB" and the big-endian size.
			var h [12]byte
			if _, err := s.ReadAt(h[:], 0); err == nil && string(h[:4]) == "ZLIB" {
				c.size, c.compressed = int64(min(binary.BigEndian.Uint64(h[4:]), 1<<62)), true
			}
		}
		if c.size < 0 || c.compressed && uint64(c.size) > maxInflateRatio*c.fsize+4096 {
			return 0, fmt.Errorf("%s claims %d bytes from %d compressed (%d×; real DWARF compresses about 5×): corrupt or crafted", s.Name, s.Size, c.fsize, uint64(c.size)/max(c.fsize, 1))
		}
		claims = append(claims, c)
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].off < claims[j].off })
	var total int64
	for i, c := range claims {
		if i > 0 {
			if p := claims[i-1]; (p.compressed || c.compressed) && p.fsize > 0 && c.off < p.off+p.fsize {
				return 0, fmt.Errorf("%s and %s share bytes in the file (at 0x%x): corrupt or crafted", p.name, c.name, c.off)
			}
		}
		total += c.size
		if total > perBinary {
			return 0, fmt.Errorf("its debug sections need more than %d MiB, the most faultline loads for one binary", perBinary>>20)
		}
	}
	return total, nil
}
