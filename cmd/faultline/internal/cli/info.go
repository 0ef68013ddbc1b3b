package cli

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/perfdata"
)

const infoHelp = `Usage: faultline info [flags] FILE|-

Describes a perf.data recording on one screen, without perf: what perf report
--header-only and perf report --stats tell. It shows the recorded command line,
host, kernel, perf version, architecture, CPUs and memory, each event with its
sample count and the samples the kernel lost for it (events that share a name,
as two instances of one probe, are labeled apart: "[stack]", "[stack, 1 in
N]", "#2"), the duration from the first to the last sample, compression, the
build IDs the recording references, the header features present, and any
warnings (for example a file cut short because perf record was killed). Check a recording with it before analyzing:
lost allocation samples make attribution incomplete.

FILE "-" reads a pipe-mode recording (perf record -o -) from standard input.

Example (a recording shipped with faultline; no root or perf needed):

  faultline info testdata/perf/basic.plain.data

  # which events lost samples?
  faultline info --json app.data | jq '.events[] | select(.lost > 0)'
  perf record -o - -e page-faults:u -- ./app | faultline info -

Flags:
`

// infoEvent is one event in the info output.
type infoEvent struct {
	Name string `json:"name"`
	// Label tells events of one name apart (eventLabels); it is Name
	// where the name is unique.
	Label      string   `json:"label"`
	Samples    uint64   `json:"samples"`
	Lost       uint64   `json:"lost"`
	LostBuffer uint64   `json:"lost_ring_buffer,omitempty"`
	Type       uint32   `json:"type"`
	Config     uint64   `json:"config"`
	SampleType string   `json:"sample_type"`
	IDs        []uint64 `json:"ids,omitempty"`
	Fields     []string `json:"fields,omitempty"`
}

type infoBuildID struct {
	BuildID  string `json:"build_id"`
	Filename string `json:"filename"`
}

type infoCompression struct {
	Type    string `json:"type"`
	Level   uint32 `json:"level"`
	Ratio   uint32 `json:"ratio"`
	Records uint64 `json:"records"`
}

// infoReport is what info prints; the JSON field names are stable.
type infoReport struct {
	File      string   `json:"file"`
	Size      int64    `json:"size,omitempty"`
	PipeMode  bool     `json:"pipe_mode"`
	BigEndian bool     `json:"big_endian,omitempty"`
	Cmdline   []string `json:"cmdline"`
	infoHost
	Events []infoEvent `json:"events"`
	infoSamples
	Records     map[string]uint64 `json:"records"`
	Compression *infoCompression  `json:"compression"`
	BuildIDs    []infoBuildID     `json:"build_ids"`
	Features    []string          `json:"features"`
	Truncated   bool              `json:"truncated"`
	Warnings    []string          `json:"warnings"`
}

// infoHost is the recording machine, as the header's features describe
// it (flattened into infoReport's JSON).
type infoHost struct {
	Hostname    string `json:"hostname"`
	OSRelease   string `json:"os_release"`
	PerfVersion string `json:"perf_version"`
	Arch        string `json:"arch"`
	CPUsOnline  uint32 `json:"nr_cpus_online"`
	CPUsAvail   uint32 `json:"nr_cpus_available"`
	CPUDesc     string `json:"cpu_desc,omitempty"`
	CPUID       string `json:"cpuid,omitempty"`
	TotalMemKB  uint64 `json:"total_mem_kb"`
}

// infoSamples counts the samples and their losses, and the time they span
// (flattened into infoReport's JSON).
type infoSamples struct {
	Samples       uint64 `json:"samples"`
	LostSamples   uint64 `json:"lost_samples"`
	LostEvents    uint64 `json:"lost_ring_buffer_events"`
	FirstSampleNs uint64 `json:"first_sample_ns"`
	LastSampleNs  uint64 `json:"last_sample_ns"`
	DurationNs    uint64 `json:"duration_ns"`
}

func runInfo(env *Env, args []string) error {
	var asJSON bool
	flags := newFlagSet("info")
	flags.BoolVar(&asJSON, "json", false, `print one JSON object instead of text (stable field names; "events" lists {"name", "samples", "lost"})`)
	if done, err := parseFlags(env, flags, infoHelp, args); done {
		return err
	}
	if flags.NArg() != 1 {
		return usageError("info: want one recording (FILE, or - for stdin), got %d; run 'faultline info --help'", flags.NArg())
	}
	rep, err := buildInfo(env, flags.Arg(0))
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeInfoText(env.Stdout, rep)
	return nil
}

// openError turns an Open/New error into one line that says what the file is.
func openError(name string, err error) error {
	if errors.Is(err, perfdata.ErrNotPerfData) {
		var fe *perfdata.FormatError
		reason := err.Error()
		if errors.As(err, &fe) {
			reason = fe.Msg + fmt.Sprintf(" at 0x%x", fe.Offset)
			if strings.HasPrefix(fe.Msg, "bad magic") {
				reason = fmt.Sprintf("bad magic at 0x%x", fe.Offset)
			}
		}
		what := ""
		if fi, statErr := os.Stat(name); statErr == nil && fi.Size() == 0 {
			return fmt.Errorf("%s is empty (0 bytes), not a perf.data file; did perf record fail before writing it?", name)
		}
		if f, openErr := os.Open(name); openErr == nil {
			var head [4]byte
			if n, _ := io.ReadFull(f, head[:]); n == 4 && string(head[:]) == "\x7fELF" {
				what = "; it is an ELF binary"
			}
			f.Close()
		}
		return fmt.Errorf("%s is not a perf.data file (%s%s); perf.data files start with %s, record one with perf record", name, reason, what, perfdata.MagicLE)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err // already names the file: "open x.data: no such file or directory"
	}
	return fmt.Errorf("%s: %w", name, err)
}

func buildInfo(env *Env, name string) (*infoReport, error) {
	var r *perfdata.Reader
	var err error
	rep := &infoReport{File: name, Records: map[string]uint64{}, Warnings: []string{}, BuildIDs: []infoBuildID{}, Features: []string{}, Cmdline: []string{}}
	if name == "-" {
		rep.File = "<stdin>"
		r, err = perfdata.NewStream(env.Stdin, &perfdata.Options{Order: perfdata.FileOrder})
		if err != nil {
			if errors.Is(err, perfdata.ErrNotPerfData) {
				return nil, fmt.Errorf("standard input is not a pipe-mode perf.data stream (%v); use perf record -o -", err)
			}
			return nil, fmt.Errorf("standard input: %w", err)
		}
	} else {
		r, err = perfdata.Open(name, &perfdata.Options{Order: perfdata.FileOrder})
		if err != nil {
			return nil, openError(name, err)
		}
		if fi, err := os.Stat(name); err == nil {
			rep.Size = fi.Size()
		}
	}
	defer r.Close()
	// File order: info needs counts, not order, and file order buffers nothing.
	for r.Next() {
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", rep.File, err)
	}
	m := r.Meta()
	st := r.Stats()
	rep.PipeMode, rep.BigEndian = m.PipeMode, m.BigEndian
	rep.Cmdline = append(rep.Cmdline, m.Cmdline...)
	rep.Hostname, rep.OSRelease, rep.PerfVersion, rep.Arch = m.Hostname, m.OSRelease, m.Version, m.Arch
	rep.CPUsOnline, rep.CPUsAvail, rep.CPUDesc, rep.CPUID = m.NrCPUsOnline, m.NrCPUsAvail, m.CPUDesc, m.CPUID
	rep.TotalMemKB = m.TotalMemKB
	labels := eventLabels(r.Events())
	for i, ev := range r.Events() {
		ie := infoEvent{Name: ev.Name, Label: labels[i], Samples: ev.Samples, Lost: ev.Lost, LostBuffer: ev.LostBuffer,
			Type: uint32(ev.Attr.Type), Config: ev.Attr.Config, SampleType: ev.Attr.SampleType.String(), IDs: ev.IDs}
		if ev.Format != nil {
			for _, f := range ev.Format.Fields {
				if !f.Common {
					ie.Fields = append(ie.Fields, f.Name)
				}
			}
		}
		rep.Events = append(rep.Events, ie)
	}
	rep.Samples, rep.LostSamples, rep.LostEvents = st.Samples, st.LostSamples, st.Lost
	rep.FirstSampleNs, rep.LastSampleNs = st.FirstSample, st.LastSample
	if st.LastSample > st.FirstSample {
		rep.DurationNs = st.LastSample - st.FirstSample
	}
	for t, n := range st.RecordCounts() {
		name := t.String()
		if t == 0 {
			name = "OTHER"
		}
		rep.Records[name] = n
	}
	if st.Compressed > 0 {
		rep.Records["COMPRESSED"] = st.Compressed
	}
	if m.Compression.Type != 0 || st.Compressed > 0 {
		c := &infoCompression{Type: "zstd", Level: m.Compression.Level, Ratio: m.Compression.Ratio, Records: st.Compressed}
		if t := m.Compression.Type; t != 0 && t != perfdata.CompressZstd {
			c.Type = fmt.Sprintf("type %d", m.Compression.Type)
		}
		rep.Compression = c
	}
	for _, b := range m.BuildIDs {
		rep.BuildIDs = append(rep.BuildIDs, infoBuildID{BuildID: b.String(), Filename: b.Filename})
	}
	feats := slices.Sorted(slices.Values(m.Features))
	for _, f := range feats {
		rep.Features = append(rep.Features, f.String())
	}
	rep.Truncated = m.Truncated
	for _, w := range r.Warnings() {
		rep.Warnings = append(rep.Warnings, withAdvice(w))
	}
	if n := r.WarningCount() - len(r.Warnings()); n > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("... and %d more warnings", n))
	}
	return rep, nil
}

// eventLabels names every event distinctly: by its name, and where the
// recording gives several events one name (faultline record's stack
// instances of a probe before they had names of their own, its two ring
// owners, or perf record -e E -e E) by what tells them apart: "[stack]" or
// "[stack, 1 in N]" on an instance that carries stacks, then the position
// among the events of that label ("#2").
func eventLabels(evs []*perfdata.Event) []string {
	byName := map[string]int{}
	for _, ev := range evs {
		byName[ev.Name]++
	}
	labels := make([]string, len(evs))
	for i, ev := range evs {
		labels[i] = ev.Name
		if byName[ev.Name] < 2 || ev.Attr.SampleType&(perfdata.SampleStackUser|perfdata.SampleCallchain) == 0 {
			continue
		}
		if a := ev.Attr; a.SamplePeriod > 1 && a.Flags&perfdata.AttrFreq == 0 {
			labels[i] += fmt.Sprintf(" [stack, 1 in %d]", a.SamplePeriod)
		} else {
			labels[i] += " [stack]"
		}
	}
	seen := map[string]int{}
	for i, l := range labels {
		if seen[l]++; seen[l] > 1 {
			labels[i] = fmt.Sprintf("%s #%d", l, seen[l])
		}
	}
	return labels
}

func fmtTime(ns uint64) string { return fmt.Sprintf("%d.%06d", ns/1e9, ns%1e9/1e3) }

func writeInfoText(w io.Writer, rep *infoReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	or := func(s string) string {
		if s == "" {
			return "(not recorded)"
		}
		return s
	}
	mode := "file mode"
	if rep.PipeMode {
		mode = "pipe mode"
	}
	if rep.BigEndian {
		mode += ", big endian"
	}
	if rep.Size > 0 {
		mode = report.FormatBytes(rep.Size) + ", " + mode
	}
	fmt.Fprintf(tw, "file\t%s (%s)\n", rep.File, mode)
	fmt.Fprintf(tw, "command\t%s\n", or(strings.Join(rep.Cmdline, " ")))
	fmt.Fprintf(tw, "host\t%s\n", or(rep.Hostname))
	fmt.Fprintf(tw, "kernel\t%s\n", or(rep.OSRelease))
	fmt.Fprintf(tw, "perf\t%s\n", or(rep.PerfVersion))
	fmt.Fprintf(tw, "arch\t%s\n", or(rep.Arch))
	cpus := "(not recorded)"
	if rep.CPUsOnline > 0 || rep.CPUsAvail > 0 {
		cpus = fmt.Sprintf("%d online, %d available", rep.CPUsOnline, rep.CPUsAvail)
		if rep.CPUDesc != "" {
			cpus += " (" + rep.CPUDesc + ")"
		}
	}
	fmt.Fprintf(tw, "cpus\t%s\n", cpus)
	mem := "(not recorded)"
	if rep.TotalMemKB > 0 {
		mem = report.FormatBytes(int64(rep.TotalMemKB << 10))
	}
	fmt.Fprintf(tw, "memory\t%s\n", mem)
	dur := "(no sample times)"
	if rep.LastSampleNs > 0 {
		dur = fmt.Sprintf("%.3f ms (%s to %s)", float64(rep.DurationNs)/1e6, fmtTime(rep.FirstSampleNs), fmtTime(rep.LastSampleNs))
	}
	fmt.Fprintf(tw, "duration\t%s\n", dur)
	comp := "none"
	if c := rep.Compression; c != nil {
		comp = fmt.Sprintf("%s level %d, ratio %d (%d compressed records)", c.Type, c.Level, c.Ratio, c.Records)
	}
	fmt.Fprintf(tw, "compression\t%s\n", comp)
	fmt.Fprintf(tw, "features\t%s\n", or(strings.Join(rep.Features, " ")))
	tw.Flush()

	fmt.Fprintf(w, "\nevents:\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "samples\tlost\t\n")
	for _, e := range rep.Events {
		fmt.Fprintf(tw, "%d\t%d\t  %s\n", e.Samples, e.Lost, e.Label)
	}
	fmt.Fprintf(tw, "%d\t%d\t  total\n", rep.Samples, rep.LostSamples)
	tw.Flush()
	if rep.LostEvents > 0 {
		fmt.Fprintf(w, "(LOST records: %d events dropped from full ring buffers; the same losses as above, counted per buffer)\n", rep.LostEvents)
	}

	names := slices.SortedFunc(maps.Keys(rep.Records), func(a, b string) int {
		return cmp.Or(cmp.Compare(rep.Records[b], rep.Records[a]), cmp.Compare(a, b)) // most records first
	})
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, rep.Records[n]))
	}
	fmt.Fprintf(w, "\nrecords: %s\n", strings.Join(parts, ", "))

	if len(rep.BuildIDs) > 0 {
		fmt.Fprintf(w, "\nbuild ids:\n")
		for _, b := range rep.BuildIDs {
			fmt.Fprintf(w, "  %-40s  %s\n", b.BuildID, b.Filename)
		}
	}
	if len(rep.Warnings) > 0 {
		fmt.Fprintf(w, "\nwarnings:\n")
		for _, x := range rep.Warnings {
			fmt.Fprintf(w, "  %s\n", x)
		}
	}
}
