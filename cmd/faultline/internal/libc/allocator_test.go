package libc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/faultline/faultline/cmd/faultline/internal/libc/libctest"
	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/faultline/faultline/perfdata/schema"
)

// symfs is testdata/alloc's tree of real binaries (Debian 12's libc,
// libstdc++, jemalloc 5.3, tcmalloc 2.10, mimalloc 2.0.9 and the programs
// built against them by testdata/alloc/gen.sh).
const symfs = "../../../../testdata/alloc/symfs"

// allocTree is a fake system holding those binaries at their paths.
func allocTree(t *testing.T) *fakeSystem {
	t.Helper()
	f := &fakeSystem{Files: libctest.Files{Real: map[string]string{}, Text: map[string]string{}}, env: map[string]string{}}
	for _, p := range []string{
		"/tmp/faultline-alloc/bin/alloc", "/tmp/faultline-alloc/bin/alloc-static", "/tmp/faultline-alloc/bin/alloc-je-static",
		"/tmp/faultline-alloc/bin/alloc-mi", "/tmp/faultline-alloc/bin/store-je", "/tmp/faultline-alloc/bin/store-tc-static",
		"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
		"/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.10", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0",
		"/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30",
	} {
		if _, err := os.Stat(symfs + p); err != nil {
			t.Fatalf("fixture %s%s is missing: run testdata/alloc/gen.sh", symfs, p)
		}
		f.Real[p] = symfs + p
	}
	// The sonames the programs need, as the ld.so cache resolves them.
	f.Real["/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"] = f.Real["/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0"]
	f.Real["/usr/lib/x86_64-linux-gnu/libstdc++.so.6"] = f.Real["/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30"]
	return f
}

// TestFindAllocator: the object malloc binds to, as ld.so searches (the
// program, LD_PRELOAD, DT_NEEDED breadth first), and its family.
// Independent check: `nm -D` / `nm` of each file lists malloc defined (T)
// in exactly the object named, and the family's mark (mallocx, tc_malloc,
// mi_malloc, __libc_malloc) beside it; `readelf -d` lists the DT_NEEDED
// order (store-je: libjemalloc.so.2 before libstdc++ and libc).
func TestFindAllocator(t *testing.T) {
	const bin, lib = "/tmp/faultline-alloc/bin/", "/usr/lib/x86_64-linux-gnu/"
	for _, tc := range []struct {
		prog, preload string
		path          string
		family        schema.Family
		how           string
		static        bool
	}{
		{bin + "alloc", "", lib + "libc.so.6", schema.FamilyGlibc, "needed by alloc", false},
		{bin + "alloc-static", "", bin + "alloc-static", schema.FamilyGlibc, "statically linked", true},
		{bin + "alloc-je-static", "", bin + "alloc-je-static", schema.FamilyJemalloc, "defined by the program itself", false},
		{bin + "alloc-mi", "", lib + "libmimalloc.so.2.0", schema.FamilyMimalloc, "needed by alloc-mi", false},
		{bin + "store-je", "", lib + "libjemalloc.so.2", schema.FamilyJemalloc, "needed by store-je", false},
		{bin + "store-tc-static", "", bin + "store-tc-static", schema.FamilyTcmalloc, "defined by the program itself", false},
		// LD_PRELOAD comes first, split at colons and spaces; an entry
		// that is missing or defines no malloc is passed over.
		{bin + "alloc", "/nowhere.so " + lib + "libstdc++.so.6:" + lib + "libtcmalloc_minimal.so.4.5.10", lib + "libtcmalloc_minimal.so.4.5.10", schema.FamilyTcmalloc, "LD_PRELOAD", false},
		{bin + "store-je", lib + "libmimalloc.so.2", lib + "libmimalloc.so.2.0", schema.FamilyMimalloc, "LD_PRELOAD", false},
		// A program that defines malloc binds its own calls to it,
		// whatever is preloaded.
		{bin + "store-tc-static", lib + "libjemalloc.so.2", bin + "store-tc-static", schema.FamilyTcmalloc, "defined by the program itself", false},
	} {
		f := allocTree(t)
		a, err := FindAllocator(f, tc.prog, tc.preload)
		if err != nil {
			t.Errorf("%s (LD_PRELOAD=%q): %v", tc.prog, tc.preload, err)
			continue
		}
		if a.Path != tc.path || a.Family != tc.family || !strings.Contains(a.How, tc.how) || a.Static != tc.static {
			t.Errorf("%s (LD_PRELOAD=%q): %+v; want %s, %v, %q, static %v", tc.prog, tc.preload, *a, tc.path, tc.family, tc.how, tc.static)
		}
	}
}

// TestFindAllocatorErrors: what FindAllocator cannot answer says what to do.
func TestFindAllocatorErrors(t *testing.T) {
	f := allocTree(t)
	delete(f.Real, "/usr/lib/x86_64-linux-gnu/libc.so.6")
	if _, err := FindAllocator(f, "/tmp/faultline-alloc/bin/alloc", ""); err == nil || !strings.Contains(err.Error(), "--libc") {
		t.Errorf("libc missing: %v", err)
	}
	f.Text["/data"] = "not a program"
	if _, err := FindAllocator(f, "/data", ""); err == nil || !strings.Contains(err.Error(), "not a program") {
		t.Errorf("not ELF: %v", err)
	}
}

// TestForProcessAllocator: for -p, the program when it defines malloc, a
// mapped jemalloc/tcmalloc/mimalloc library, else the libc (maps lines as
// /proc/PID/maps writes them: start-end perms offset dev inode path).
func TestForProcessAllocator(t *testing.T) {
	const bin, lib = "/tmp/faultline-alloc/bin/", "/usr/lib/x86_64-linux-gnu/"
	f := allocTree(t)
	f.inodes = map[string]uint64{lib + "libjemalloc.so.2": 11, lib + "libc.so.6": 12, lib + "libstdc++.so.6.0.30": 13}
	line := func(ino int, path string) string {
		return fmt.Sprintf("7f0000000000-7f0000001000 r-xp 00000000 fe:01 %d %s\n", ino, path)
	}
	f.Real["/proc/1/exe"] = f.Real[bin+"store-je"]
	f.Text["/proc/1/maps"] = line(10, bin+"store-je") + line(13, lib+"libstdc++.so.6.0.30") + line(11, lib+"libjemalloc.so.2") + line(12, lib+"libc.so.6")
	f.Real["/proc/2/exe"] = f.Real[bin+"store-tc-static"]
	f.Text["/proc/2/maps"] = line(10, bin+"store-tc-static") + line(12, lib+"libc.so.6")
	f.Real["/proc/3/exe"] = f.Real[bin+"alloc"]
	f.Text["/proc/3/maps"] = line(10, bin+"alloc") + line(12, lib+"libc.so.6")
	for _, tc := range []struct {
		pid    int
		path   string
		family schema.Family
	}{
		{1, lib + "libjemalloc.so.2", schema.FamilyJemalloc},
		{2, "/proc/2/exe", schema.FamilyTcmalloc},
		{3, lib + "libc.so.6", schema.FamilyGlibc},
	} {
		a, err := ForProcessAllocator(f, tc.pid)
		if err != nil || a.Path != tc.path || a.Family != tc.family {
			t.Errorf("pid %d: %+v, %v; want %s, %v", tc.pid, a, err, tc.path, tc.family)
		}
	}
}

// TestGnuHashLookup checks the .gnu.hash lookup against debug/elf's
// reading of every dynamic symbol: for each defined function of the
// committed allocator libraries (testdata/alloc/symfs) and of this
// machine's C and C++ libraries, and for names no object defines.
func TestGnuHashLookup(t *testing.T) {
	paths := committedAndSystem(t, "alloc/symfs/*/*/*/*.so*", "libm.so.6")
	checked := 0
	for _, p := range paths {
		f := perftest.OpenELF(t, p)
		look, ok := gnuHashLookup(f)
		if !ok {
			continue
		}
		syms, err := f.DynamicSymbols()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, s := range syms {
			want[s.Name] = want[s.Name] || definedFunc(s.Info, s.Section)
		}
		for name, defined := range want {
			if look(name) != defined {
				t.Errorf("%s: %s: lookup %v, debug/elf %v", p, name, look(name), defined)
			}
		}
		for _, name := range []string{"", "no_such_function", "mallocx_", "malloc_no"} {
			if look(name) {
				t.Errorf("%s: %q found", p, name)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("none of %v has a .gnu.hash section", paths)
	}
	t.Logf("%d objects checked", checked)
}

// TestGnuHashLookupHostile corrupts the committed libc's .gnu.hash header
// (bucket count, first hashed symbol, bloom size) and its chains: every
// lookup answers, none panics or reads outside the sections.
func TestGnuHashLookupHostile(t *testing.T) {
	data := perftest.ReadTestdata(t, "alloc", "symfs", "usr", "lib", "x86_64-linux-gnu", "libc.so.6")
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	hs := f.Section(".gnu.hash")
	if hs == nil {
		t.Fatal("the committed libc has no .gnu.hash")
	}
	off := int(hs.Offset)
	for _, c := range []struct {
		at  int
		val uint32
	}{{0, 0}, {0, 1}, {0, 0xffffffff}, {4, 0}, {4, 0xffffffff}, {8, 0xffffffff}, {8, 0x7fffffff}, {16 + 8*64, 0xffffffff}, {int(hs.Size) - 4, 0xfffffffe}} {
		bad := bytes.Clone(data)
		binary.LittleEndian.PutUint32(bad[off+c.at:], c.val)
		g, err := elf.NewFile(bytes.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		look := dynDefines(g)
		for _, name := range []string{"malloc", "free", "mallocx", "tc_malloc", "no_such_function"} {
			look(name) // must not panic
		}
	}
}

// TestDynStrings: the needed libraries and run paths read string by
// string equal debug/elf's (which reads the whole string table), for the
// committed programs and libraries and this machine's C and C++ runtimes.
func TestDynStrings(t *testing.T) {
	paths := committedAndSystem(t, "*/symfs/*/*/*/*", "libgcc_s.so.1")
	checked := 0
	for _, p := range paths {
		f, err := elf.Open(p)
		if err != nil {
			continue // not ELF (a directory, a source file)
		}
		for _, tag := range []elf.DynTag{elf.DT_NEEDED, elf.DT_RUNPATH, elf.DT_RPATH, elf.DT_SONAME} {
			want, _ := f.DynString(tag)
			if got := dynStrings(f, tag); !slices.Equal(got, want) {
				t.Errorf("%s: %v: %q, debug/elf %q", p, tag, got, want)
			}
		}
		if needed, _ := f.ImportedLibraries(); len(needed) > 0 {
			checked++
		}
		f.Close()
	}
	if checked < 5 {
		t.Fatalf("%d dynamically linked files checked: the committed symfs trees are missing", checked)
	}
}

// committedAndSystem lists the committed files matching pattern (under
// testdata) and those of this machine's libc, libstdc++ and lib that
// exist.
func committedAndSystem(t *testing.T, pattern, lib string) []string {
	paths := perftest.Glob(t, pattern)
	for _, name := range []string{"libc.so.6", "libstdc++.so.6", lib} {
		if p := "/lib/x86_64-linux-gnu/" + name; exists(p) {
			paths = append(paths, p)
		}
	}
	return paths
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// BenchmarkDefinesMalloc: what FindAllocator does to each object it
// visits (open it, look malloc and the families' marks up), on the
// committed C++ library, which defines no malloc and has thousands of
// dynamic symbols.
func BenchmarkDefinesMalloc(b *testing.B) {
	path := perftest.Glob(b, "alloc/symfs/*/*/*/libstdc++.so*")[0]
	for range b.N {
		f, err := elf.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if d := definesMalloc(f, false); d.malloc {
			b.Fatalf("%s defines malloc", path)
		}
		f.Close()
	}
}
