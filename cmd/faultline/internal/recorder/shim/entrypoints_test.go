package shim

import (
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/schema"
)

var update = flag.Bool("update", false, "rewrite csrc/entrypoints.h from schema.EntryPoints")

// entryPointsHeader writes csrc/entrypoints.h: the families' own entry
// points of schema.EntryPoints, one FL_EP line per symbol, for the shim's
// family objects (csrc/family.c and the stubs).
func entryPointsHeader() []byte {
	var b bytes.Buffer
	b.WriteString(`/*
 * entrypoints.h — the allocator families' own entry points, which the
 * family objects of the shim interpose (family.c, stubs-x86_64.S).
 * Generated from perfdata/schema's EntryPoints, the table record's uprobes
 * and analyze read too, by
 *   go test ./cmd/faultline/internal/recorder/shim -run TestEntryPointsHeader -update
 * Do not edit.
 *
 * FL_EP(line, symbol, fn, families, isfree, nargs, size_arg, nmemb_arg, whole):
 *   fn         the entry point's index in the table (fl_rec.fn)
 *   families   a bit per family that has it (1 << the family's FL_FAM_*)
 *   isfree     1: it frees its first argument
 *   nargs      the integer arguments recorded (the table's Args)
 *   size_arg   the argument that gives the bytes asked for; with
 *   nmemb_arg  (not -1) the count they are multiplied by
 *   whole      1: a call from the program's code may be written whole at
 *              its return (at most two arguments, no status, and it does
 *              not throw: an exception would leave the ring busy)
 */
#ifndef FAULTLINE_ENTRYPOINTS_H
#define FAULTLINE_ENTRYPOINTS_H

`)
	for f := schema.Family(0); f < schema.FamilyMimalloc+1; f++ {
		fmt.Fprintf(&b, "#define FL_FAM_%s %d\n", strings.ToUpper(famName(f)), f)
	}
	fmt.Fprintf(&b, "#define FL_NFN_ALL %d\n\n", len(schema.EntryPoints))
	var lines []string
	wholes := make([]string, len(schema.EntryPoints))
	for i := range schema.EntryPoints {
		e := &schema.EntryPoints[i]
		if len(e.Families) == 0 {
			continue // the C names: alloc.c
		}
		fams := 0
		for _, f := range e.Families {
			fams |= 1 << f
		}
		free, size, nmemb := 0, -1, -1
		if e.Role == schema.EntryFree {
			free = 1
		}
		for j, a := range e.Args {
			switch a {
			case "size":
				size = j
			case "nmemb":
				nmemb = j
			}
		}
		if free == 1 {
			size = 0
		}
		whole := 0
		if free == 0 && !e.Status && len(e.Args) <= 2 && !throws(e) {
			whole = 1
		}
		wholes[i] = fmt.Sprint(whole)
		for _, sym := range e.Symbols {
			lines = append(lines, fmt.Sprintf("\tFL_EP(%d, %s, %d, %#x, %d, %d, %d, %d, %d)", len(lines), sym, i, fams, free, len(e.Args), size, nmemb, whole))
		}
	}
	for i, w := range wholes {
		if w == "" {
			wholes[i] = "0" // the C names: writer.c
		}
	}
	fmt.Fprintf(&b, "#define FL_NEP %d\n\n#define FL_EPS \\\n%s\n\n", len(lines), strings.Join(lines, " \\\n"))
	fmt.Fprintf(&b, "/* FL_FN_WHOLE: the whole column by fn, for every entry point of the table. */\n#define FL_FN_WHOLE {%s}\n\n#endif\n", strings.Join(wholes, ", "))
	return b.Bytes()
}

func famName(f schema.Family) string {
	if f == schema.FamilyOther {
		return "other"
	}
	return f.String()
}

// throws reports whether an entry point throws where it cannot allocate
// (C++'s operator new, and the families' own new: tc_new, mi_new).
func throws(e *schema.EntryPoint) bool {
	if strings.Contains(e.Event, "nothrow") {
		return false
	}
	return strings.HasPrefix(e.Event, "op_new") || strings.HasPrefix(e.Event, "tc_new") || strings.HasPrefix(e.Event, "mi_new")
}

// TestEntryPointsHeader: csrc/entrypoints.h is what schema.EntryPoints
// generates (-update rewrites it), and the shim's Func numbering is the
// table's: the C names of abi.h at the table's first places.
func TestEntryPointsHeader(t *testing.T) {
	want := entryPointsHeader()
	if *update {
		if err := os.WriteFile("csrc/entrypoints.h", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("csrc/entrypoints.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("csrc/entrypoints.h is not what schema.EntryPoints generates: run go test ./cmd/faultline/internal/recorder/shim -run TestEntryPointsHeader -update, then sh csrc/build.sh, and commit both")
	}
	if len(schema.EntryPoints) != NumFuncs {
		t.Errorf("schema.EntryPoints has %d entry points, shim.NumFuncs says %d", len(schema.EntryPoints), NumFuncs)
	}
	cnames := []string{"malloc", "calloc", "realloc", "reallocarray", "free", "memalign", "aligned_alloc", "posix_memalign", "valloc", "pvalloc"}
	if len(cnames) != int(NumCFuncs) {
		t.Fatalf("%d C names, NumCFuncs %d", len(cnames), NumCFuncs)
	}
	for i, n := range cnames {
		if e := schema.EntryPoints[i]; e.Event != n || len(e.Families) != 0 {
			t.Errorf("schema.EntryPoints[%d] is %s (families %v), the shim's FL_FN %d is %s", i, e.Event, e.Families, i, n)
		}
	}
	for i := NumCFuncs; i < NumFuncs; i++ {
		e := &schema.EntryPoints[i]
		if len(e.Families) == 0 {
			t.Errorf("schema.EntryPoints[%d] (%s) is for every family but comes after the C names", i, e.Event)
		}
		// family.c reads the bytes asked for from the size argument, and
		// forwards at most four arguments, three of them recorded.
		if e.Role != schema.EntryFree && !slices.Contains(e.Args, "size") || len(e.Args) > 3 {
			t.Errorf("schema.EntryPoints[%d] (%s): arguments %v: the shim needs a size (allocating) and at most three", i, e.Event, e.Args)
		}
	}
}

// TestObjectsExportTheirFamily reads each embedded shim object's dynamic
// symbols (debug/elf: what the dynamic linker binds to) and checks them
// against the table: a family's object defines every symbol of that
// family's own entry points and none of another family's, and the object
// for glibc defines none of the families' but operator new and new[]
// (libstdc++'s, stood in for): a glibc program that looks up mallocx finds
// nothing.
func TestObjectsExportTheirFamily(t *testing.T) {
	for _, f := range []schema.Family{schema.FamilyGlibc, schema.FamilyJemalloc, schema.FamilyTcmalloc, schema.FamilyMimalloc} {
		obj, name := ObjectFor(f)
		ef, err := elf.NewFile(bytes.NewReader(obj))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		syms, err := ef.DynamicSymbols()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defined := map[string]bool{}
		for _, s := range syms {
			if s.Section != elf.SHN_UNDEF && elf.ST_BIND(s.Info) == elf.STB_GLOBAL {
				defined[s.Name] = true
			}
		}
		for i := range schema.EntryPoints {
			e := &schema.EntryPoints[i]
			if len(e.Families) == 0 {
				continue
			}
			want := e.For(f) && HasFamilyObject(f)
			for _, sym := range e.Symbols {
				if !HasFamilyObject(f) && (sym == "_Znwm" || sym == "_Znam") {
					continue // libstdc++'s, which the glibc object stands in for (new.c)
				}
				if defined[sym] != want {
					t.Errorf("%s: defines %s (%s): %v, want %v", name, sym, e.Event, defined[sym], want)
				}
			}
		}
		for _, c := range []string{"malloc", "free", "calloc", "realloc", "mmap", "munmap", "madvise"} {
			if !defined[c] {
				t.Errorf("%s does not define %s", name, c)
			}
		}
	}
}
