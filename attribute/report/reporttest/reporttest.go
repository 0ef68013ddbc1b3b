// Package reporttest builds small faultline profiles by hand, shaped as
// report.Builder writes them in by-alloc mode, for tests of the code that
// reads such profiles (diff, the diff command). Like net/http/httptest it is
// meant for tests only.
package reporttest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/faultline/faultline/attribute/report"
	"github.com/google/pprof/profile"
)

// Frame is one symbolized frame of an allocation's stack.
type Frame struct {
	Func, File string
	Line       int64
}

// Sample is one sample: an allocation site's stack, or an unattributed
// class, with its values.
type Sample struct {
	Stack  []Frame  // leaf first
	Class  string   // unattributed class ("[stack]"); its pseudo location becomes the leaf
	Flags  []string // flag labels
	Comm   string   // comm label
	Via    string   // via label: the library call of a stack that starts at its site frame
	Values [3]int64 // faults, allocs, alloc_space
}

// The frames of the small program whose builds the tests of diff and of
// the diff command compare: main reads its input, builds an index and
// parses lines; old_cache and new_table allocate through xmalloc.
var (
	Main       = Frame{Func: "main", File: "main.c", Line: 40}
	ReadInput  = Frame{Func: "read_input", File: "io.c", Line: 12}
	BuildIndex = Frame{Func: "build_index", File: "index.c", Line: 88}
	ParseLine  = Frame{Func: "parse_line", File: "parse.c", Line: 30}
	OldCache   = Frame{Func: "old_cache", File: "cache.c", Line: 7}
	NewTable   = Frame{Func: "new_table", File: "table.c", Line: 19}
	XMalloc    = Frame{Func: "xmalloc", File: "xmalloc.c", Line: 20}
)

// Build makes a profile the way one build of a program would: its binary
// mapped at start, each distinct frame at its own address (stride apart),
// source files under dir. Two builds differ in every address and path. It
// fails tb when the result is not a valid profile.
func Build(tb testing.TB, start, stride uint64, dir string, samples []Sample) *profile.Profile {
	tb.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: report.SampleFaults, Unit: report.UnitCount},
			{Type: report.SampleAllocs, Unit: report.UnitCount},
			{Type: report.SampleAllocSpace, Unit: report.UnitBytes},
		},
		DefaultSampleType: report.SampleFaults,
		PeriodType:        &profile.ValueType{Type: report.SampleFaults, Unit: report.UnitCount},
		Period:            1,
	}
	m := &profile.Mapping{ID: 1, Start: start, Limit: start + 0x100000, File: dir + "/prog", HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	p.Mapping = []*profile.Mapping{m}
	// Functions by name and locations by frame, each made once with the
	// next ID of its list.
	funcs := map[string]*profile.Function{}
	locs := map[Frame]*profile.Location{}
	function := func(name, file string) *profile.Function {
		if f := funcs[name]; f != nil {
			return f
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name, Filename: file}
		funcs[name] = f
		p.Function = append(p.Function, f)
		return f
	}
	location := func(f Frame, class bool) *profile.Location {
		if l := locs[f]; l != nil {
			return l
		}
		l := &profile.Location{ID: uint64(len(p.Location) + 1)}
		if class {
			// report.Builder's class location: no mapping, no address.
			l.Line = []profile.Line{{Function: function(f.Func, "")}}
		} else {
			file := f.File
			if !filepath.IsAbs(file) { // system headers stay where they are
				file = filepath.Join(dir, file)
			}
			l.Mapping, l.Address = m, start+0x1000+l.ID*stride
			l.Line = []profile.Line{{Function: function(f.Func, file), Line: f.Line}}
		}
		locs[f] = l
		p.Location = append(p.Location, l)
		return l
	}
	for _, s := range samples {
		ps := &profile.Sample{Value: append([]int64(nil), s.Values[:]...), Label: map[string][]string{}}
		if s.Class != "" {
			ps.Location = append(ps.Location, location(Frame{Func: s.Class}, true))
			ps.Label[report.ClassLabel] = []string{s.Class}
		}
		for _, f := range s.Stack {
			ps.Location = append(ps.Location, location(f, false))
		}
		if len(s.Flags) > 0 {
			ps.Label[report.FlagLabel] = s.Flags
		}
		if s.Comm != "" {
			ps.Label[report.CommLabel] = []string{s.Comm}
		}
		if s.Via != "" {
			ps.Label[report.ViaLabel] = []string{s.Via}
		}
		p.Sample = append(p.Sample, ps)
	}
	if err := p.CheckValid(); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Read reads the profile in a file (gzipped or not) and fails tb unless it
// parses and is valid.
func Read(tb testing.TB, path string) *profile.Profile {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return Parse(tb, path, data)
}

// Parse parses a profile in pprof's wire format (gzipped or not) and fails
// tb, naming the profile what, unless it parses and is valid.
func Parse(tb testing.TB, what string, data []byte) *profile.Profile {
	tb.Helper()
	p, err := profile.ParseData(data)
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	if err := p.CheckValid(); err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	return p
}

// RoundTrip checks p, writes it in pprof's wire format and parses it back:
// the profile as a reader of the file sees it.
func RoundTrip(tb testing.TB, p *profile.Profile) *profile.Profile {
	tb.Helper()
	if err := p.CheckValid(); err != nil {
		tb.Fatalf("CheckValid: %v", err)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		tb.Fatal(err)
	}
	q, err := profile.Parse(&buf)
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// Write writes p to the file at path in pprof's wire format (gzipped), and
// fails tb when it cannot.
func Write(tb testing.TB, path string, p *profile.Profile) {
	tb.Helper()
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
}
