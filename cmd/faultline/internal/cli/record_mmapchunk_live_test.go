package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestRecordInprocLiveFreeUnmapsChunk: glibc's free unmaps a chunk malloc
// mapped for itself with the C library's own munmap, which the in-process
// method's wrappers do not see; analyze takes the free of such a chunk as
// its unmapping. The program (below) mallocs, touches and frees 4 MiB
// twice: the first is a chunk of its own mapping (over the 128 KiB mmap
// threshold), and its free raises the threshold past its size, so the
// second comes from the heap, at other addresses. At most one is resident
// at a time: with the page tables read at no time (no snapshot corrects
// the figures) the tracked peak is 4 MiB and the little the program holds
// besides, with either method; both held would be 8 MiB.
func TestRecordInprocLiveFreeUnmapsChunk(t *testing.T) {
	requireLiveRecord(t)
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "chunks.c")
	os.WriteFile(src, []byte(`#include <stdlib.h>
#include <string.h>
int main(void) {
	for (int i = 0; i < 2; i++) {
		char *volatile p = malloc(4 << 20);
		memset(p, i + 1, 4 << 20);
		free(p);
	}
	return 0;
}
`), 0o644)
	bin := filepath.Join(dir, "chunks")
	if out, err := exec.Command(cc, "-O0", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	peak := regexp.MustCompile(`Resident: +peak ([0-9.]+) MiB`)
	for _, method := range []string{"inproc", "uprobe"} {
		data := filepath.Join(dir, method+".data")
		if code, stderr := runRecordMain("-q", "--method", method, "--no-exit-snapshots", "--resident-every", "0", "-o", data, "--", bin); code != ExitOK {
			t.Fatalf("%s: exit %d\n%s", method, code, stderr)
		}
		text := analyzeText(t, data)
		m := peak.FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("%s: no resident peak in:\n%s", method, text)
		}
		mib, _ := strconv.ParseFloat(m[1], 64)
		t.Logf("%s: tracked resident peak %.1f MiB", method, mib)
		if mib < 4 || mib > 6 {
			t.Errorf("%s: tracked resident peak %.1f MiB; one 4 MiB block at a time is 4 MiB and a little (both held: 8)\n%s", method, mib, text)
		}
	}
}
