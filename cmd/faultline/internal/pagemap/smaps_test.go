package pagemap

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// smapsHuge returns AnonHugePages, in bytes, of the mapping of our own
// process that holds addr, as /proc/self/smaps gives it.
func smapsHuge(t *testing.T, addr uint64) uint64 {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		l := sc.Text()
		if s, e, _, ok := parseMapsLine(l); ok {
			in = s <= addr && addr < e
			continue
		}
		if v, ok := strings.CutPrefix(l, "AnonHugePages:"); ok && in {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
