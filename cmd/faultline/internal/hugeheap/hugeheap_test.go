package hugeheap

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestAdvised reads the kernel's view of the heap (/proc/self/smaps): the
// mappings init advised carry the "hg" (MADV_HUGEPAGE) flag.
func TestAdvised(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !bytes.Contains(mode, []byte("[madvise]")) {
		t.Skipf("transparent huge pages are not in madvise mode here (%q, %v): nothing to advise", mode, err)
	}
	if advised[0] == advised[1] {
		t.Fatal("init advised nothing although transparent huge pages are in madvise mode")
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lo, hi uintptr
	covered := advised[0]
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var a, b uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &a, &b); n == 2 {
			lo, hi = a, b // a mapping's first line; its fields follow
			continue
		}
		flags, ok := strings.CutPrefix(line, "VmFlags:")
		if !ok || hi <= advised[0] || lo >= advised[1] {
			continue
		}
		if !strings.Contains(" "+flags+" ", " hg ") {
			t.Errorf("mapping %#x-%#x inside the advised %#x-%#x lacks hg: VmFlags:%s", lo, hi, advised[0], advised[1], flags)
		}
		if lo <= covered {
			covered = max(covered, hi)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if covered < advised[1] {
		t.Errorf("the mappings found cover %#x-%#x of the advised %#x-%#x", advised[0], covered, advised[0], advised[1])
	}
}

// TestWanted: record's heap is left in 4 KiB pages, every other
// command's is advised (the reasons are wanted's).
func TestWanted(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"faultline", "record", "--", "true"}, false},
		{[]string{"faultline", "analyze", "x.data"}, true},
		{[]string{"faultline"}, true},
		{[]string{"faultline", "--", "record"}, true},
	} {
		if got := wanted(c.args); got != c.want {
			t.Errorf("wanted(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
