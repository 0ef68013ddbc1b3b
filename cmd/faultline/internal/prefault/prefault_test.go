package prefault

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestExeRanges: the read-only and executable mappings of the file that
// holds the address, not its writable ones nor another file's.
func TestExeRanges(t *testing.T) {
	maps := `00400000-00c30000 r-xp 00000000 fe:00 123 /usr/bin/faultline
00c30000-0150c000 r--p 00830000 fe:00 123 /usr/bin/faultline
0150c000-015b1000 rw-p 0110c000 fe:00 123 /usr/bin/faultline
015b1000-035fb000 rw-p 00000000 00:00 0
7f0000000000-7f0000021000 r-xp 00000000 fe:00 456 /usr/lib/other.so
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
`
	got := exeRanges([]byte(maps), 0x150c010)
	want := [][2]uintptr{{0x400000, 0xc30000}, {0xc30000, 0x150c000}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("exeRanges = %x, want %x", got, want)
	}
	if got := exeRanges([]byte(maps), 0x1000); got != nil {
		t.Errorf("an address in no mapping: %x, want none", got)
	}
	if got := exeRanges([]byte("zz-00 r-xp 0 0 0 /x\n"), 0); got != nil {
		t.Errorf("a malformed line: %x, want none", got)
	}
}

// TestPopulate: a file mapping none of whose pages this process has
// touched is resident in full after populate (smaps Rss), and init found
// the test binary's own read-only mappings.
func TestPopulate(t *testing.T) {
	if populated == 0 {
		t.Fatal("init populated no mapping of the test binary")
	}
	// A file of 4 MiB, in the page cache once written.
	const size = 4 << 20
	name := t.TempDir() + "/f"
	if err := os.WriteFile(name, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	lo := uintptr(unsafe.Pointer(&m[0]))
	if kb := rssKB(t, lo); kb != 0 {
		t.Fatalf("%d kB of an untouched mapping resident before populate", kb)
	}
	if n := populate([][2]uintptr{{lo, lo + size}}); n != 1 {
		t.Skip("madvise(MADV_POPULATE_READ) failed (Linux before 5.14?): nothing to populate")
	}
	if kb := rssKB(t, lo); kb != size>>10 {
		t.Errorf("%d kB resident after populate, want all %d", kb, size>>10)
	}
}

// rssKB is the Rss of this process's mapping that starts at lo
// (/proc/self/smaps).
func rssKB(t *testing.T, lo uintptr) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var a, b uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &a, &b); n == 2 {
			in = a == lo
		} else if kb, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			var n int
			fmt.Sscan(kb, &n)
			return n
		}
	}
	t.Fatalf("no mapping at %#x in /proc/self/smaps", lo)
	return 0
}
