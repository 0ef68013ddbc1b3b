package cli

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/faultline/faultline/attribute/diff"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
)

const diffHelp = `Usage: faultline diff [flags] BASE NEW
       faultline diff [flags] BASE1 BASE2 ... -- NEW
       faultline diff [flags] --base BASE1 --base BASE2 ... NEW

Compares faultline profiles (or perf.data recordings, analyzed on the fly
without --symfs) allocation site by allocation site, and fails when NEW
regressed.

A site is where your code allocated: its first frame in your own code
(system libraries and code inlined from system headers, such as
std::vector's internals, are skipped; the name says which library function
it went through, e.g. "app::Store::fill app.cpp:31 (via
std::vector::push_back)"), named by function, source file and line, never
by address: two builds of a program, or two runs with different ASLR
layouts, compare site for site.

--key site (the default) keys a site by what survives an edit that keeps
the program's behaviour: the function, the library function it went through,
and the allocation call's place among that function's calls, not its file or
line: BASE's calls pair with NEW's in source order, or by the one line shift
that explains them when a call was added or not made; a file only each side
has is one file renamed. Calls no rule pairs are one "unmatched" site with
both sides' sums, failing only as a whole. Lines added above or between the
calls, functions reordered or moved to another file, or a caller that differs
deeper in the stack, leave a site the same; the name shows NEW's line.
--key line keys a site by its
whole stack from that frame, every frame with its line (a moved line is a
new site). --raw-sites keys by the
whole stack from the profile's leaf (the raw leaf in profiles analyzed with
--raw-sites). Unsymbolized frames are named module+offset. Faults that hit
no allocation are one site per class ("[stack]", "[file] libc.so.6", ...);
the program's own file is one class whatever the binary is called. Classes
are reported but do not fail the comparison unless --gate-classes.

Several baselines (runs of the same BASE build): every BASE value is their
mean, and each site's spread over them (largest minus smallest) is its
noise floor: a site fails only when it also grew by more than that, so a
site that varies from run to run by itself cannot fail. Every format says
how many baselines there were and shows each site's noise.

A site regresses when it grew by more than --threshold relative to BASE, by
at least --min-delta in absolute terms and by more than its noise floor (0
with one baseline); a site absent from BASE counts as infinite growth once
it reaches --min-delta. Improvements never fail.

Lost samples: every profile carries its recording's per-event counts and
losses (PERF_RECORD_LOST_SAMPLES, as perf report --stats; see
'go tool pprof -comments'). When an input lost allocation or fault events,
its attribution is incomplete and a change may be the loss, not the
program: every format says so (text and markdown a warning line, json the
"losses" list), and --max-loss P fails the comparison when any such event
lost more than P percent of its samples.

Exit status: 0 no regression (improvements included); 1 a site regressed;
2 bad usage, an unreadable input, or an input lost more than --max-loss.

Example (recordings shipped with faultline: one program on an input and on
one three times larger; no root or perf needed):

  faultline analyze -q --symfs testdata/diff/symfs --symfs-fallback testdata/diff/small.data -o base.pb.gz
  faultline analyze -q --symfs testdata/diff/symfs --symfs-fallback testdata/diff/large.data -o head.pb.gz
  faultline diff base.pb.gz head.pb.gz            # exit status 1: index_lines grew

A CI job that records the base branch three times and the head, comments on
the pull request and fails the job on a regression:

  git checkout "$BASE_SHA" && make
  for i in 1 2 3; do
    faultline record -o base$i.data -- ./bench
    faultline analyze -q base$i.data -o base$i.pb.gz
  done
  git checkout "$HEAD_SHA" && make
  faultline record -o head.data -- ./bench
  faultline analyze -q head.data -o head.pb.gz
  faultline diff --format markdown -o diff.pb.gz base*.pb.gz -- head.pb.gz > comment.md

  # afterwards, where did it change?
  go tool pprof -top diff.pb.gz

Flags:
`

type diffFlags struct {
	metric    string
	threshold string
	minDelta  int64
	top       int
	format    string
	output    string
	gateClass bool
	rawSites  bool
	maxLoss   float64
	key       string
	bases     []string
}

func runDiff(env *Env, args []string) error {
	var f diffFlags
	fs := newFlagSet("diff")
	fs.StringVar(&f.metric, "metric", report.SampleFaults, "compare `NAME`: faults, allocs or alloc_space")
	fs.StringVar(&f.threshold, "threshold", "10%", "relative growth `T` that fails a site: 10% or 0.1 (a bare number must be below 1)")
	fs.Int64Var(&f.minDelta, "min-delta", -1, "absolute growth `N` a site needs before it can fail, so tiny sites cannot trip the threshold (default 8 for faults and allocs, 65536 for alloc_space)")
	hideDefault(fs, "min-delta")
	fs.IntVar(&f.top, "top", 10, "rows per site table in text and markdown (`N`, 0 = all); json always lists every site")
	fs.StringVar(&f.format, "format", "text", "report format `F`: text (aligned columns, for terminals), markdown (a pull-request comment) or json (stable field names)")
	fs.BoolVar(&f.gateClass, "gate-classes", false, "let unattributed classes ([heap], [file] libc.so.6, ...) fail the comparison too; by default they are reported but not gated")
	fs.StringVar(&f.key, "key", string(diff.KeySite), "what makes a site `K`: site (function, library call and the call's place in the function; survives unrelated edits) or line (the whole stack from the site, with lines)")
	fs.StringArrayVar(&f.bases, "base", nil, "a baseline `FILE`; repeat for several runs of BASE (their spread is each site's noise floor); NEW is then the one argument")
	fs.BoolVar(&f.rawSites, "raw-sites", false, "key and name sites by their whole stack and leaf frame instead of from their first frame in your own code")
	fs.Float64Var(&f.maxLoss, "max-loss", -1, "exit 2 when an input lost more than `P` percent of an allocation or fault event's samples (0: any loss; default: warn only)")
	hideDefault(fs, "max-loss")
	sym := addSymbolizeFlags(fs)
	fs.StringVarP(&f.output, "output", "o", "", "also write a pprof diff profile to `FILE`: NEW's samples plus BASE's negated and labelled pprof::base=true, as 'go tool pprof -diff_base' builds it (- for standard output; the report then goes to standard error)")
	if done, err := parseFlags(env, fs, diffHelp, args); done {
		return err
	}
	baseNames, newName, err := diffInputs(fs.Args(), fs.ArgsLenAtDash(), f.bases)
	if err != nil {
		return usageError("diff: %v; run 'faultline diff --help'", err)
	}
	if !slices.Contains(diff.Keys, diff.Key(f.key)) {
		return usageError("diff: unknown --key %q (want site or line)", f.key)
	}
	if !slices.Contains(diff.Metrics, f.metric) {
		return usageError("diff: unknown --metric %q (want %s)", f.metric, strings.Join(diff.Metrics, ", "))
	}
	if !slices.Contains(diff.Formats, f.format) {
		return usageError("diff: unknown --format %q (want %s)", f.format, strings.Join(diff.Formats, ", "))
	}
	threshold, err := diff.ParseThreshold(f.threshold)
	if err != nil {
		return usageError("diff: --threshold: %v", err)
	}
	if !fs.Changed("min-delta") {
		f.minDelta = diff.DefaultMinDelta(f.metric)
	} else if f.minDelta < 0 {
		return usageError("diff: --min-delta must not be negative")
	}
	if f.top < 0 {
		return usageError("diff: --top must not be negative")
	}
	if fs.Changed("max-loss") && (f.maxLoss < 0 || f.maxLoss > 100) {
		return usageError("diff: --max-loss %v: want a percentage from 0 to 100", f.maxLoss)
	}

	var bases []*profile.Profile
	for i, name := range baseNames {
		base, err := loadForDiff(env, name, sym.config())
		if err != nil {
			label := "BASE"
			if len(baseNames) > 1 {
				label = fmt.Sprintf("BASE%d", i+1)
			}
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("diff: %s: %w", label, err)}
		}
		bases = append(bases, base)
	}
	head, err := loadForDiff(env, newName, sym.config())
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("diff: NEW: %w", err)}
	}
	res, err := diff.CompareBases(bases, head, diff.Options{Metric: f.metric, Threshold: threshold, MinDelta: f.minDelta, GateClasses: f.gateClass, Key: diff.Key(f.key), RawSites: f.rawSites})
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("diff: %w", err)}
	}
	// The report first: a diff profile that cannot be written does not
	// cost the comparison.
	if err := diff.Render(summaryWriter(env, f.output), res, f.format, diff.RenderOptions{Top: f.top, BaseName: strings.Join(baseNames, ", "), NewName: newName}); err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("diff: writing the report: %w", err)}
	}
	if f.output != "" {
		if err := writeDiffProfile(env, f.output, bases, head); err != nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("diff: -o %s: %w", f.output, err)}
		}
	}
	if fs.Changed("max-loss") && res.MaxLossPercent() > f.maxLoss {
		var worst diff.Loss
		for _, l := range res.Losses {
			if l.Percent() > worst.Percent() {
				worst = l
			}
		}
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("diff: %s lost %.1f%% of its %s samples, more than --max-loss %v%%: record again with less loss (faultline record keeps range events in rings of their own) or raise --max-loss",
			worst.Input, worst.Percent(), worst.Event, f.maxLoss)}
	}
	if res.Regressed() {
		// Also on stderr: CI logs show it when stdout goes to a file.
		return &ExitError{Code: ExitRegression, Err: errors.New(res.Verdict())}
	}
	return nil
}

// loadForDiff reads a profile, or analyzes a perf.data recording through
// analyzeForDiff. The input is opened once and its format sniffed from a
// buffered reader, so pipes work (diff <(cat p.pb.gz) ...).
func loadForDiff(env *Env, path string, cfg symbolize.Config) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br, perf, err := diff.Sniff(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !perf {
		return diff.Read(path, br)
	}
	name := path
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		// A recording in a pipe: its sniffed bytes are in br, so analyze
		// reads it as a stream, the way it reads standard input.
		sub := *env
		sub.Stdin = br
		env, name = &sub, "-"
	}
	p, err := analyzeForDiff(env, name, cfg)
	if err != nil {
		return nil, fmt.Errorf("analyzing %s: %w", path, err)
	}
	return p, nil
}

// diffInputs splits diff's arguments into the baselines and NEW: BASE NEW;
// BASE1 BASE2 ... -- NEW (dash is where "--" stood, -1 without one); or
// --base FILE (repeated) and NEW.
func diffInputs(args []string, dash int, flagBases []string) (bases []string, new string, err error) {
	switch {
	case dash >= 0:
		if len(args)-dash != 1 {
			return nil, "", fmt.Errorf("want one NEW after --, got %d", len(args)-dash)
		}
		bases = append(slices.Clip(flagBases), args[:dash]...)
	case len(flagBases) > 0:
		if len(args) != 1 {
			return nil, "", fmt.Errorf("with --base, want one more input, NEW; got %d", len(args))
		}
		bases = flagBases
	default:
		if len(args) != 2 {
			return nil, "", fmt.Errorf("want two inputs, BASE and NEW, got %d (several baselines: BASE1 BASE2 ... -- NEW)", len(args))
		}
		bases = args[:1]
	}
	if len(bases) == 0 {
		return nil, "", errors.New("no BASE before --")
	}
	return bases, args[len(args)-1], nil
}

func writeDiffProfile(env *Env, path string, bases []*profile.Profile, head *profile.Profile) error {
	p, err := diff.ProfileBases(bases, head)
	if err != nil {
		return err
	}
	return writeProfile(env, path, p)
}
