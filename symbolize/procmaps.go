package symbolize

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParseProcMaps reads a copy of /proc/PID/maps, for symbolizing addresses
// of a process that no perf.data recorded (a Pin trace, an ftrace log).
// Lines look like
//
//	55d0c8a00000-55d0c8a02000 r-xp 00001000 fe:01 1311   /usr/bin/prog
//
// The path (which may hold spaces) is optional: anonymous mappings get
// "//anon", as perf names them.
func ParseProcMaps(r io.Reader) ([]*Mapping, error) {
	var out []*Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		m, err := parseMapsLine(line)
		if err != nil {
			return nil, fmt.Errorf("maps line %d %q: %v (want a copy of /proc/PID/maps)", n, line, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("maps: %w", err)
	}
	return out, nil
}

func parseMapsLine(line string) (*Mapping, error) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return nil, fmt.Errorf("%d fields, want at least 5", len(f))
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return nil, fmt.Errorf("range %q has no '-'", f[0])
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	pgoff, err3 := strconv.ParseUint(f[2], 16, 64)
	ino, err4 := strconv.ParseUint(f[4], 10, 64)
	majs, mins, ok2 := strings.Cut(f[3], ":")
	maj, err5 := strconv.ParseUint(majs, 16, 32)
	min, err6 := strconv.ParseUint(mins, 16, 32)
	for _, err := range []error{err1, err2, err3, err4, err5, err6} {
		if err != nil {
			return nil, err
		}
	}
	if !ok2 || end <= start || len(f[1]) != 4 {
		return nil, fmt.Errorf("bad range, device or permissions")
	}
	m := &Mapping{Start: start, End: end, Pgoff: pgoff, Ino: ino, Maj: uint32(maj), Min: uint32(min), File: "//anon"}
	if f[1][0] == 'r' {
		m.Prot |= 1
	}
	if f[1][1] == 'w' {
		m.Prot |= 2
	}
	if f[1][2] == 'x' {
		m.Prot |= 4
		m.Exec = true
	}
	// The path starts at the sixth field and runs to the end of the line.
	if len(f) > 5 {
		rest := line
		for i := 0; i < 5; i++ {
			rest = strings.TrimLeft(rest, " \t")
			rest = rest[strings.IndexAny(rest, " \t")+1:]
		}
		m.File = strings.TrimSpace(rest)
	}
	return m, nil
}
