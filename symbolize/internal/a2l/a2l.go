// Package a2l reads GNU addr2line's output and puts faultline's names in
// its form, for the tests that check symbolization against addr2line.
package a2l

import (
	"bufio"
	"bytes"
	"path"
	"strconv"
	"strings"
)

// Frame is one level of an address's inline chain as addr2line -f -i prints
// it: the function, then file:line.
type Frame struct {
	Func, Loc string
}

// Key names an address: its ELF virtual address in File ("" when the output
// covers one file).
type Key struct {
	File string
	Addr uint64
}

// Parse reads `addr2line -a -f -i` output: an address line ("0x…"), then
// function/location pairs, innermost first. A line "# file: F" starts the
// addresses of file F; other lines starting with # are comments.
func Parse(data []byte) (map[Key][]Frame, error) {
	res := map[Key][]Frame{}
	var file, fn string
	var cur Key
	haveFn := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# file: "); ok {
			file = f
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "0x") && !haveFn {
			a, err := strconv.ParseUint(line[2:], 16, 64)
			if err != nil {
				return nil, err
			}
			cur = Key{file, a}
			res[cur] = nil
			continue
		}
		if !haveFn {
			fn, haveFn = line, true
			continue
		}
		res[cur] = append(res[cur], Frame{fn, line})
		haveFn = false
	}
	return res, sc.Err()
}

// NormLoc normalizes addr2line's file:line: no discriminator, "??:0" as
// "??:?", a cleaned path. binutils joins DW_AT_comp_dir, the directory entry
// and the file name without cleaning ("./csu/./csu/init-first.c"), where
// debug/dwarf cleans; binutils 2.40 also joins comp_dir with DWARF 5
// directory entry 0, which already is the compilation directory
// ("./csu/./csu/x.c"): that doubling is undone.
func NormLoc(loc string) string {
	if i := strings.Index(loc, " (discriminator "); i >= 0 {
		loc = loc[:i]
	}
	if loc == "??:0" {
		return "??:?"
	}
	if i := strings.LastIndexByte(loc, ':'); i > 0 && loc[:i] != "??" {
		p := path.Clean(loc[:i])
		if j := strings.IndexByte(p, '/'); j > 0 && strings.HasPrefix(p[j+1:], p[:j+1]) {
			p = p[j+1:]
		}
		loc = p + loc[i:]
	}
	return loc
}

// Loc spells a file and line as addr2line does: "??" for no file, "?" for
// no line.
func Loc(file string, line int) string {
	l := "?"
	if file == "" {
		file = "??"
	}
	if line != 0 {
		l = strconv.Itoa(line)
	}
	return file + ":" + l
}
