package diff

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
	"github.com/google/pprof/profile"
)

// fuzzStacks resolves a few fixed stacks for the seed profiles.
type fuzzStacks struct{}

func (fuzzStacks) Stack(id attribute.StackID) []report.Location {
	m := &report.Mapping{File: "/usr/bin/prog", BuildID: "0123abcd", Start: 0x400000, Limit: 0x500000}
	var out []report.Location
	for i := range int(id)%4 + 1 {
		out = append(out, report.Location{Addr: 0x401000 + uint64(i)*0x10 + uint64(id)<<8, Mapping: m,
			Lines: []report.Line{{Function: "f" + string(rune('a'+i)), SystemName: "f", File: "/src/prog.c", Line: int64(10 + i)}}})
	}
	return out
}

// seedProfile builds a profile the way analyze does: report.Builder fed
// with allocations and faults, attributed and not, in either mode.
func seedProfile(mode report.Mode, n int) []byte {
	b := report.NewBuilder(mode, func(pid uint32) string { return "prog" })
	for i := range n {
		a := &attribute.Allocation{Pid: 1, Tid: 1, Size: uint64(16 << i), Site: attribute.StackID(i%3 + 1), Flags: attribute.Flags(i % 8)}
		b.Allocation(a)
		b.Fault(&attribute.Fault{Pid: 1, Stack: attribute.StackID(i + 5), Access: attribute.Access(i % 4)}, a)
		b.Fault(&attribute.Fault{Pid: 1, Stack: attribute.StackID(i + 9), Class: attribute.Class{Kind: attribute.ClassKind(i % 5), Name: "libc.so.6"}}, nil)
	}
	var buf bytes.Buffer
	if err := b.Profile(fuzzStacks{}).Write(&buf); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// FuzzProfile feeds arbitrary bytes to the profile loader `faultline diff`
// uses, and whatever loads to Compare (against itself and a real profile in
// every metric), the diff profile and every renderer. Property: an error,
// or a result that renders without panicking. Seeds: profiles written by
// report.Builder (gzipped and raw), a perf.data magic and the diff
// fixtures when present.
func FuzzProfile(f *testing.F) {
	ref := seedProfile(report.ByAlloc, 5)
	f.Add(ref)
	f.Add(seedProfile(report.ByTouch, 3))
	f.Add(seedProfile(report.ByAlloc, 0))
	if p, err := profile.ParseData(ref); err == nil {
		var raw bytes.Buffer
		if err := p.WriteUncompressed(&raw); err == nil {
			f.Add(raw.Bytes())
		}
	}
	f.Add([]byte(perfdata.MagicLE + "\x68\x00\x00\x00"))
	f.Add([]byte{})
	files, _ := filepath.Glob("../../testdata/diff/*.pb.gz")
	for _, path := range files {
		if data, err := os.ReadFile(path); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	refProf, err := profile.ParseData(ref)
	if err != nil {
		f.Fatal(err)
	}
	// Load takes a path; one file per worker process, rewritten per input.
	path := filepath.Join(f.TempDir(), "in.pb.gz")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := load(path)
		if err != nil {
			_ = err.Error()
			return
		}
		for _, metric := range Metrics {
			for _, pair := range [][2]*profile.Profile{{p, p}, {refProf, p}, {p, refProf}} {
				r, err := compareOne(pair[0], pair[1], Options{Metric: metric, Threshold: 0.1, MinDelta: DefaultMinDelta(metric)})
				if err != nil {
					_ = err.Error()
					continue
				}
				_ = r.Verdict()
				for _, format := range Formats {
					if err := Render(io.Discard, r, format, RenderOptions{Top: 3, BaseName: "a", NewName: "b"}); err != nil {
						t.Fatalf("render %s: %v", format, err)
					}
				}
			}
		}
		if d, err := profileOne(refProf.Copy(), p); err == nil { // Profile consumes its inputs
			_ = d.Write(io.Discard)
		}
	})
}

// TestLoadGzipBomb: a small file that inflates past maxProfileSize is
// refused as not a profile, without inflating it all.
func TestLoadGzipBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses 256 MiB")
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zero := make([]byte, 1<<20)
	for range maxProfileSize>>20 + 1 {
		zw.Write(zero)
	}
	zw.Close()
	path := filepath.Join(t.TempDir(), "bomb.pb.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := load(path)
	var npe *notProfileError
	if !errors.As(err, &npe) || !bytes.Contains([]byte(err.Error()), []byte("MiB")) {
		t.Fatalf("Load of a %d-byte gzip bomb: %v", buf.Len(), err)
	}
}
