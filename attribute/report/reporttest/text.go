package reporttest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// Text renders p as readable text for golden files, one line per sample
// like go tool pprof -top, with everything else the profile holds on
// lines of their own before the samples: sample and period types, times,
// comments, drop and keep patterns, mappings. A sample's line is its
// values, then its stack leaf first (each frame "function file:line"; an
// inlined frame's callers joined by " < " within one location, locations
// by " ← "), then its labels; every location carries its address and
// mapping, and a function its full name where it differs from the short
// one, so two profiles with the same text hold the same content.
func Text(p *profile.Profile) string {
	var b strings.Builder
	types := make([]string, len(p.SampleType))
	for i, st := range p.SampleType {
		types[i] = st.Type + "/" + st.Unit
	}
	fmt.Fprintf(&b, "types: %s", strings.Join(types, " "))
	if p.DefaultSampleType != "" {
		fmt.Fprintf(&b, " (default %s)", p.DefaultSampleType)
	}
	b.WriteString("\n")
	if p.PeriodType != nil {
		fmt.Fprintf(&b, "period: %d %s/%s\n", p.Period, p.PeriodType.Type, p.PeriodType.Unit)
	}
	if p.TimeNanos != 0 || p.DurationNanos != 0 {
		fmt.Fprintf(&b, "time: %d ns, duration %d ns\n", p.TimeNanos, p.DurationNanos)
	}
	if p.DropFrames != "" || p.KeepFrames != "" {
		fmt.Fprintf(&b, "drop: %q keep: %q\n", p.DropFrames, p.KeepFrames)
	}
	if p.DocURL != "" {
		fmt.Fprintf(&b, "doc: %s\n", p.DocURL)
	}
	for _, c := range p.Comments {
		fmt.Fprintf(&b, "comment: %s\n", c)
	}
	for _, m := range p.Mapping {
		fmt.Fprintf(&b, "mapping %d: %#x-%#x offset %#x %s", m.ID, m.Start, m.Limit, m.Offset, m.File)
		if m.BuildID != "" {
			fmt.Fprintf(&b, " build-id %s", m.BuildID)
		}
		if m.KernelRelocationSymbol != "" {
			fmt.Fprintf(&b, " kernel-relocation %s", m.KernelRelocationSymbol)
		}
		fmt.Fprintf(&b, " has[func %v file %v line %v inline %v]\n", m.HasFunctions, m.HasFilenames, m.HasLineNumbers, m.HasInlineFrames)
	}
	fmt.Fprintf(&b, "samples: %d\n", len(p.Sample))
	for _, s := range p.Sample {
		for _, v := range s.Value {
			fmt.Fprintf(&b, "%8d ", v)
		}
		frames := make([]string, len(s.Location))
		for i, loc := range s.Location {
			frames[i] = locationText(loc)
		}
		b.WriteString(strings.Join(frames, " ← "))
		b.WriteString(labelsText(s))
		b.WriteString("\n")
	}
	return b.String()
}

// locationText is one location: its lines (innermost first), address and
// mapping.
func locationText(loc *profile.Location) string {
	lines := make([]string, len(loc.Line))
	for i, l := range loc.Line {
		f := l.Function
		if f == nil {
			lines[i] = fmt.Sprintf("? :%d", l.Line)
			continue
		}
		s := f.Name
		if f.SystemName != f.Name {
			s += " {" + f.SystemName + "}"
		}
		s += fmt.Sprintf(" %s:%d", f.Filename, l.Line)
		if l.Column != 0 {
			s += fmt.Sprintf(":%d", l.Column)
		}
		if f.StartLine != 0 {
			s += fmt.Sprintf(" (from %d)", f.StartLine)
		}
		lines[i] = s
	}
	s := strings.Join(lines, " < ")
	if loc.Address != 0 || loc.Mapping != nil {
		s += fmt.Sprintf(" @%#x", loc.Address)
		if loc.Mapping != nil {
			s += fmt.Sprintf("/m%d", loc.Mapping.ID)
		}
	}
	if loc.IsFolded {
		s += " folded"
	}
	return s
}

// labelsText is a sample's labels, string then numeric, each sorted by key:
// " [key=value ...]", or "" without any.
func labelsText(s *profile.Sample) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.Label)) {
		for _, v := range s.Label[k] {
			parts = append(parts, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.NumLabel)) {
		for i, v := range s.NumLabel[k] {
			unit := ""
			if i < len(s.NumUnit[k]) && s.NumUnit[k][i] != "" {
				unit = s.NumUnit[k][i]
			}
			parts = append(parts, fmt.Sprintf("%s=%d%s", k, v, unit))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " [" + strings.Join(parts, " ") + "]"
}

// CheckGolden compares text with the golden file at path, or with update
// writes text there. A mismatch names the lines only one side has (up to
// 20 of each), so a failure says which samples (sites) changed; rerun is
// the command that rewrites the file.
func CheckGolden(tb testing.TB, path, text string, update bool, rerun string) {
	tb.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("committed golden file missing: %v (%s writes it)", err, rerun)
	}
	if string(data) == text {
		return
	}
	want, got := strings.Split(string(data), "\n"), strings.Split(text, "\n")
	var b strings.Builder
	for _, d := range []struct {
		sign        string
		lines, from []string
	}{{"-", want, got}, {"+", got, want}} {
		count := map[string]int{}
		for _, l := range d.from {
			count[l]++
		}
		n := 0
		for _, l := range d.lines {
			if count[l] > 0 {
				count[l]--
				continue
			}
			if n++; n <= 20 {
				fmt.Fprintf(&b, "\n  %s %s", d.sign, l)
			}
		}
		if n > 20 {
			fmt.Fprintf(&b, "\n  %s ... %d more", d.sign, n-20)
		}
	}
	if b.Len() == 0 {
		b.WriteString("\n  (the same lines in another order)")
	}
	tb.Errorf("%s differs from this tree's profile (- golden, + now; if intended, rewrite it with %s and say why in the commit):%s", path, rerun, b.String())
}
