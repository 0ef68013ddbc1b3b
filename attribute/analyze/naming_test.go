package analyze

import (
	"debug/elf"
	"regexp"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata/schema"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
)

// analyzeNaming analyzes testdata/naming/NAME.data with the binaries of
// symfs (a directory under testdata).
func analyzeNaming(t *testing.T, name, symfs string) *Result {
	t.Helper()
	files := symbolize.Config{Symfs: "../../testdata/" + symfs, BuildIDDir: "../../testdata/buildid-cache", Getenv: func(string) string { return "" }}
	return analyzePath(t, "../../testdata/naming/"+name+".data", files, Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc})
}

// flatFunctions is what `pprof -top` lists with faults in its flat column:
// the function of each sample's leaf location (its innermost line), or
// the module's name for a location without lines, as pprof merges those.
func flatFunctions(p *profile.Profile) map[string]int64 {
	out := map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Location) == 0 || s.Value[0] == 0 || len(s.Label[report.ClassLabel]) > 0 {
			continue
		}
		l := s.Location[0]
		name := "[module]"
		if len(l.Line) > 0 {
			name = l.Line[0].Function.Name
		}
		out[name] += s.Value[0]
	}
	return out
}

// TestStrippedSites: a stripped program's sites (testdata/naming's
// twosites, built -O2 and strip -s) are as many pprof functions as the
// summary has sites with faults, each named module+offset, none merged
// under the module's name; and the profile's addresses are
// module-relative: a mapping of file offset Off starts at the virtual
// address the ELF program headers give Off (readelf -l's arithmetic).
func TestStrippedSites(t *testing.T) {
	res := analyzeNaming(t, "stripped", "naming/symfs")
	var sites int
	for _, s := range report.TopSites(res.Profile, 100, false) {
		if s.Faults > 0 {
			sites++
		}
	}
	flat := flatFunctions(res.Profile)
	named := regexp.MustCompile(`^twosites\+0x[0-9a-f]+$`)
	for f := range flat {
		if !named.MatchString(f) {
			t.Errorf("flat function %q, want twosites+0x...", f)
		}
	}
	if sites < 2 || len(flat) != sites {
		t.Errorf("%d flat functions %v for %d summary sites; want as many, at least 2", len(flat), flat, sites)
	}
	f, err := elf.Open("../../testdata/naming/symfs/tmp/faultline-naming/bin/twosites")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checked := 0
	for _, m := range res.Profile.Mapping {
		if !strings.HasSuffix(m.File, "/twosites") {
			continue
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Off <= m.Offset && m.Offset < p.Off+p.Filesz {
				if want := p.Vaddr + m.Offset - p.Off; m.Start != want {
					t.Errorf("mapping at offset %#x starts at %#x, want %#x (module-relative)", m.Offset, m.Start, want)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Error("no mapping of twosites checked")
	}
}

// TestStaticAllocatorSites: with jemalloc and tcmalloc linked into the
// program (testdata/alloc's binaries, recorded with the memory-map calls),
// no site is named after an allocator function: the allocators' own
// mappings and start-up allocations are [allocator] jemalloc and
// [allocator] tcmalloc, the program's sites stay its own.
func TestStaticAllocatorSites(t *testing.T) {
	for _, c := range []struct {
		name string
		want []string // sites that must be there
	}{
		{"je-static", []string{"fill_small alloc.c:19", "big_buffer alloc.c:26", "[allocator] jemalloc (via mmap)"}},
		{"tc-static", []string{"main store.cc:30 (via std::vector::vector)", "[allocator] tcmalloc"}},
	} {
		res := analyzeNaming(t, c.name, "alloc/symfs")
		have := map[string]bool{}
		for _, s := range res.Profile.Sample {
			if len(s.Label[report.ClassLabel]) > 0 {
				continue
			}
			name := report.SampleSiteName(s, false)
			have[name] = true
			fn, _, _ := strings.Cut(name, " ")
			if _, internal := schema.AllocatorInternal(fn); internal || report.IsAllocator(fn) {
				t.Errorf("%s: site %q is named after an allocator function", c.name, name)
			}
		}
		for _, w := range c.want {
			if !have[w] {
				t.Errorf("%s: no site %q among %v", c.name, w, have)
			}
		}
	}
}
