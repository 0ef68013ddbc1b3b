package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/faultline/faultline/attribute/timeline"
	"github.com/spf13/pflag"
)

const timelineHelp = `Usage: faultline timeline [flags] FILE

Draws a recording's resident memory over time: the anonymous pages its
faults made resident, stacked by the allocation sites (and the program's own
mmap calls) that held them, the largest at the bottom, the rest as "other";
below, the faults per interval; a red line marks the peak, a dotted one the
program's own peak anonymous RSS when faultline record measured it. Pages
leave when they are released (munmap, madvise DONTNEED/FREE/REMOVE, brk
shrinking), which needs the memory-map calls in the recording (faultline
record records them; with perf: -e 'syscalls:sys_enter_mmap' and the rest, see
faultline analyze --help).

The picture is one self-contained file that any browser opens, no network:
SVG (-o rss.svg) or an HTML page holding it (-o rss.html).

Example:
  faultline record -o rec.data -- ./myprog
  faultline timeline rec.data -o rss.svg      # then open rss.svg

Flags:
`

func runTimeline(env *Env, args []string) error {
	fs := pflag.NewFlagSet("timeline", pflag.ContinueOnError)
	var (
		out     string
		top     int
		columns int
		quiet   bool
	)
	fs.StringVarP(&out, "output", "o", "rss.svg", "write the picture to `FILE`: .svg, or .html for a page holding it")
	fs.IntVar(&top, "top", 8, "show the `N` sites that held the most at their own peak; the rest are \"other\"")
	fs.IntVar(&columns, "columns", 400, "sample the time axis at `N` points")
	fs.BoolVarP(&quiet, "quiet", "q", false, "print only errors")
	sym := addSymbolizeFlags(fs)
	if done, err := parseFlags(env, fs, timelineHelp, args); done {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("timeline: want one recording, got %d arguments (see faultline timeline --help)", fs.NArg())
	}
	ext := strings.ToLower(filepath.Ext(out))
	if ext != ".svg" && ext != ".html" && ext != ".htm" {
		return usageError("timeline: -o %s: the name must end in .svg or .html", out)
	}
	if top < 1 || columns < 2 || columns > 100000 {
		return usageError("timeline: --top must be at least 1 and --columns between 2 and 100000")
	}
	start := time.Now()
	opts := defaultAnalyzeOptions()
	opts.Timeline = true
	res, err := analyzeFile(env, fs.Arg(0), opts, sym.config(), quiet)
	if err != nil {
		return err
	}
	c, err := timeline.Build(res, "Resident memory by site: "+filepath.Base(fs.Arg(0)), columns, top)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	f, err := os.Create(out)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	if ext == ".svg" {
		err = c.WriteSVG(f)
	} else {
		err = c.WriteHTML(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("writing %s: %w", out, err)}
	}
	if !quiet {
		rs := &res.Summary.Resident
		fmt.Fprintf(env.Stderr, "faultline: drew %s in %.2fs: peak %.1f MiB at %.3f s, %d sites shown\n", out, time.Since(start).Seconds(),
			float64(rs.PeakBytes)/(1<<20), float64(rs.PeakTime)/1e9, len(c.Sites))
		if rs.MapCalls == 0 {
			fmt.Fprintln(env.Stderr, "faultline: note: the recording has no memory-map calls: releases are not seen, so the memory only grows (record with faultline record, or perf record -e 'syscalls:sys_enter_munmap' …)")
		}
	}
	return nil
}
