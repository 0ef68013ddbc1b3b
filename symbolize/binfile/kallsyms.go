package binfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// kernelName is the name of a kernel frame when no kallsyms file is given,
// and the "binary" perf prints for kernel frames.
const kernelName = "[kernel]"

// errKallsymsRestricted says a kallsyms file has only zero addresses: it
// was read by a user that kernel.kptr_restrict hides addresses from.
var errKallsymsRestricted = errors.New("kallsyms addresses are all zero (kernel.kptr_restrict): copy /proc/kallsyms as root, or run 'sysctl kernel.kptr_restrict=0' first")

// Kallsyms names kernel addresses from a /proc/kallsyms-format file
// ("ffffffff81000000 T _stext" or "ffffffffc0a01000 t fn\t[module]").
// A nil *Kallsyms names every address [kernel].
type Kallsyms struct {
	syms []ksym // text symbols sorted by address, one per address
}

type ksym struct {
	addr, end uint64
	name      string
	module    string // without brackets; "" for the kernel image
}

// ParseKallsyms reads text (t, T, w, W) symbols. Malformed lines are an
// error naming the line.
func ParseKallsyms(r io.Reader) (*Kallsyms, error) {
	k := &Kallsyms{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	lineNo, nonZero := 0, false
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || len(f[1]) != 1 {
			return nil, fmt.Errorf("binfile: kallsyms line %d: want \"ADDR TYPE NAME [MODULE]\", got %q", lineNo, line)
		}
		addr, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("binfile: kallsyms line %d: bad address: %w", lineNo, err)
		}
		if addr != 0 {
			nonZero = true
		}
		switch f[1][0] {
		case 't', 'T', 'w', 'W':
		default:
			continue
		}
		s := ksym{addr: addr, name: f[2]}
		if len(f) > 3 {
			s.module = strings.Trim(f[3], "[]")
		}
		k.syms = append(k.syms, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("binfile: reading kallsyms: %w", err)
	}
	if lineNo > 0 && !nonZero {
		return nil, errKallsymsRestricted
	}
	sort.SliceStable(k.syms, func(i, j int) bool { return k.syms[i].addr < k.syms[j].addr })
	out := k.syms[:0]
	for _, s := range k.syms {
		if n := len(out); n > 0 && out[n-1].addr == s.addr {
			continue // first one wins, as in the file's order
		}
		out = append(out, s)
	}
	// Sizes are unknown: a symbol ends where the next starts, except at a
	// kernel/module boundary, where it gets the rest of its page (perf's
	// symbols__fixup_end).
	for i := range out {
		if i+1 < len(out) && out[i+1].module == out[i].module {
			out[i].end = out[i+1].addr
		} else {
			out[i].end = (out[i].addr + 4096 + 4095) &^ 4095
			if i+1 < len(out) {
				out[i].end = min(out[i].end, out[i+1].addr)
			}
		}
	}
	k.syms = out
	return k, nil
}

// Lookup returns the symbol containing addr, its module ("" for the kernel
// image) and addr's offset in it.
func (k *Kallsyms) lookup(addr uint64) (name, module string, off uint64, ok bool) {
	if k == nil {
		return "", "", 0, false
	}
	i := sort.Search(len(k.syms), func(i int) bool { return k.syms[i].addr > addr }) - 1
	if i < 0 || addr >= k.syms[i].end {
		return "", "", 0, false
	}
	s := &k.syms[i]
	return s.name, s.module, addr - s.addr, true
}

// Symbolize appends the frame for kernel address addr: the kallsyms name,
// or [kernel] when there is no kallsyms or no symbol covers addr.
func (k *Kallsyms) Symbolize(addr uint64, out []Frame) []Frame {
	name, _, off, ok := k.lookup(addr)
	if !ok {
		return append(out, Frame{Func: kernelName})
	}
	return append(out, Frame{Func: name, System: name, Symbol: name, SymOffset: off})
}
