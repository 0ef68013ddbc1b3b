package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/faultline/faultline/attribute/correlate"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/spf13/pflag"
)

const correlateHelp = `Usage: faultline correlate [flags] ACCESSLOG FAULTLOG

Finds, for every page fault in FAULTLOG, the access in ACCESSLOG that
caused it: same page, same thread where both logs name threads, an access
of the fault's kind (a write fault needs a write), the first one no earlier
fault on the page explains; preferring one at the fault's ip (an exact
match; at its exact byte best), else the nearest access to the fault within
a time window. The clock offset between the logs is estimated from the
exact matches (median of fault time - access time); offset and window are
reported and can be given. Under Pin the faulting instruction runs from
Pin's code cache, so exact matches are rare: correlate says so, estimates
the offset from first touches of pages and matches by page and time.

ACCESSLOG, Intel Pin's pinatrace layout, one access per line (# lines and
columns after the address are ignored). Accepted variants:
  0xIP: R|W 0xADDR                          pinatrace itself
  SECONDS.FRACTION: 0xIP: R|W 0xADDR        with a timestamp
  SECONDS.FRACTION: TID: 0xIP: R|W 0xADDR   and a thread id (any order)
  TID: 0xIP: R|W 0xADDR                     a thread id only
Timestamps should be CLOCK_MONOTONIC (any clock works: the offset is
estimated). Without them accesses are matched in log order. A file is read
twice (offset, then time matching); standard input once: in log order, or
by time when --offset is given.

FAULTLOG, one of:
  ftrace text of exceptions:page_fault_user: the trace or trace_pipe file
    (also with options/record-tgid), or 'trace-cmd report' output
  perf.data (file or pipe) with page-faults samples recorded with -d, or
    with exceptions:page_fault_user

One of the two may be "-" for standard input. Memory grows with the number
of faults (about 510 bytes each, at most 10 million), not of accesses:
access logs of many gigabytes stream.

Output: a summary (faults matched by ip+page, by page and time, unmatched
by reason); --pairs FILE, one tab-separated row per fault with a header:
  fault_time fault_addr fault_ip access_time access_ip access_addr match
  fault_tid access_tid access fault_code reason
(match: ip, page or none; times in seconds, each in its own log's clock);
-o FILE.pb.gz, a pprof profile of faults per accessing instruction, labels
match, access (read/write), fault (read/write/exec) and reason (unmatched
faults sit at their faulting ip). Instructions are named when the binaries
are at hand: from a perf.data's mappings, or from a copy of the program's
/proc/PID/maps (--maps).

Example (faults traced in an ftrace instance of your own):

  cd /sys/kernel/tracing/instances && mkdir mine
  echo 1 > mine/events/exceptions/page_fault_user/enable
  pin -t pinatrace.so -- ./prog; cp mine/trace /tmp/faults.txt; rmdir mine
  faultline correlate --comm prog --pairs pairs.tsv -o faults.pb.gz \
      pinatrace.out /tmp/faults.txt
  go tool pprof -top -tagfocus=match=ip faults.pb.gz

Flags:
`

func runCorrelate(env *Env, args []string) error {
	fs := pflag.NewFlagSet("correlate", pflag.ContinueOnError)
	out := fs.StringP("output", "o", "", "write a pprof profile of faults per accessing instruction to `FILE` (- for standard output; the summary then goes to standard error)")
	pairs := fs.String("pairs", "", "write one tab-separated row per fault to `FILE` (- for standard output)")
	offset := fs.String("offset", "", "fault clock − access clock (`DURATION`, e.g. 27.3ms or -1.5s); default: estimated")
	window := fs.Duration("window", 0, "how far from a fault an access may lie (`DURATION`); default: 4 times the spread of exact matches, at least 50µs; 1ms with --offset")
	threads := fs.String("threads", "auto", "compare thread ids (`MODE`): auto (when the access log's are the fault log's), match, ignore")
	pid := fs.Uint32("pid", 0, "keep only faults of process `PID` (ftrace without options/record-tgid names threads: the main thread's id)")
	comm := fs.String("comm", "", "keep only faults of command `NAME` (as ftrace or perf names it)")
	pageSize := fs.Uint64("page-size", 4096, "page size in `BYTES`")
	maps := fs.String("maps", "", "name access instructions from `FILE`, a copy of the traced program's /proc/PID/maps")
	quiet := fs.BoolP("quiet", "q", false, "no summary and no warnings")
	verbose := fs.BoolP("verbose", "v", false, "print every warning in full (where debug info was looked for, ...)")
	symOpts := addSymbolizeFlags(fs)
	if done, err := parseFlags(env, fs, correlateHelp, args); done {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("correlate: want ACCESSLOG FAULTLOG; see 'faultline correlate --help'")
	}
	accessName, faultName := fs.Arg(0), fs.Arg(1)
	if accessName == "-" && faultName == "-" {
		return usageError("correlate: only one of ACCESSLOG and FAULTLOG can be standard input")
	}
	if *pairs == "-" && *out == "-" {
		return usageError("correlate: --pairs - and -o - would both write to standard output; send one to a file")
	}
	switch *threads {
	case "auto", "match", "ignore":
	default:
		return usageError("correlate: --threads %q: want auto, match or ignore", *threads)
	}
	opts := correlate.Options{PageSize: *pageSize, Window: *window, Threads: *threads}
	if *offset != "" {
		d, err := time.ParseDuration(*offset)
		if err != nil {
			return usageError("correlate: --offset %q: want a duration such as 27.3ms or -1.5s", *offset)
		}
		opts.Offset, opts.OffsetSet = int64(d), true
	}
	if *window < 0 {
		return usageError("correlate: --window %s: want a positive duration", *window)
	}
	sess, err := symbolize.NewSession(symOpts.config(), nil)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	defer sess.Close()
	sym := &correlate.Symbolizer{Sess: sess, Pid: -1}
	if *maps != "" {
		if err := addProcMaps(sess, *maps); err != nil {
			return err
		}
		sym.Pid = 0
	}

	filter := correlate.FaultFilter{Pid: *pid, Comm: *comm}
	flog, err := readFaultLog(env, faultName, filter, sess)
	if err != nil {
		return err
	}
	if len(flog.Faults) == 0 {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: no page faults (%d seen, %d left out by --pid/--comm); record exceptions:page_fault_user", displayName(faultName), flog.Seen, flog.Filtered)}
	}

	access := &accessLog{env: env, name: accessName}
	defer access.close()
	progressDone := func() {}
	if accessName != "-" {
		var progress func(int64)
		progress, progressDone = newProgress(env, accessName, *quiet, "correlating")
		if fi, err := os.Stat(accessName); err == nil && progress != nil {
			size := fi.Size()
			opts.Progress = func(pass int, n int64) {
				if opts.OffsetSet { // one pass
					progress(n)
				} else {
					progress((int64(pass-1)*size + n) / 2)
				}
			}
		}
	}
	res, err := correlate.Run(flog, access.source, opts)
	progressDone()
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) {
			return err
		}
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: %w", displayName(accessName), err)}
	}
	if *pairs != "" {
		if err := writeTo(env, *pairs, func(w io.Writer) error { return correlate.WritePairs(w, res) }); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
	}
	if *out != "" {
		if err := writeProfile(env, *out, correlate.Profile(res, sym)); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
	}
	if !*quiet {
		w := summaryWriter(env, *pairs, *out)
		correlate.WriteSummary(w, res, flog)
		if *out != "" {
			fmt.Fprintf(w, "\nNext: go tool pprof -top %s   (-tagfocus=match=ip: exact matches only)\n", *out)
		}
	}
	if *quiet {
		return nil
	}
	var nt notes
	for _, w := range append(flog.Warnings, res.Warnings...) {
		nt.add(errors.New(w))
	}
	if *out != "" {
		nt.add(sess.Warnings()...)
	}
	nt.write(env.Stderr, *verbose)
	return nil
}

// addProcMaps adds the mappings of path, a copy of a process's
// /proc/PID/maps, to sess as process 0's.
func addProcMaps(sess *symbolize.Session, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	ms, err := symbolize.ParseProcMaps(f)
	f.Close()
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: %w", path, err)}
	}
	for _, m := range ms {
		// The vdso's bytes are in no file a maps copy can name.
		if m.File != "[vdso]" {
			sess.Maps.Add(0, m)
		}
	}
	return nil
}

// accessLog hands correlate the access log for each pass: standard input
// ("-") once, a file again from its start when it is a regular file.
type accessLog struct {
	env    *Env
	name   string
	opened *os.File
}

func (a *accessLog) source(pass int) (io.Reader, error) {
	if a.name == "-" {
		if pass > 1 {
			return nil, correlate.ErrOnce
		}
		return a.env.Stdin, nil
	}
	if a.opened == nil {
		f, err := os.Open(a.name)
		if err != nil {
			return nil, &ExitError{Code: ExitFailure, Err: err}
		}
		a.opened = f
		return f, nil
	}
	if fi, err := a.opened.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, correlate.ErrOnce
	}
	if _, err := a.opened.Seek(0, io.SeekStart); err != nil {
		return nil, correlate.ErrOnce
	}
	return a.opened, nil
}

func (a *accessLog) close() {
	if a.opened != nil {
		a.opened.Close()
	}
}

// readFaultLog reads ftrace text or a perf.data (file or pipe), told apart
// by the perf.data magic.
func readFaultLog(env *Env, name string, filter correlate.FaultFilter, sess *symbolize.Session) (*correlate.FaultLog, error) {
	var r io.Reader
	if name == "-" {
		r = env.Stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, &ExitError{Code: ExitFailure, Err: err}
		}
		defer f.Close()
		r = f
	}
	br := bufio.NewReaderSize(r, 1<<16)
	magic, _ := br.Peek(perfdata.MagicLen)
	var log *correlate.FaultLog
	var err error
	if perfdata.IsPerfData(magic) {
		var pr *perfdata.Reader
		if name == "-" {
			pr, err = perfdata.NewStream(br, nil)
		} else {
			pr, err = perfdata.Open(name, nil)
		}
		if err != nil {
			return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: %w", displayName(name), err)}
		}
		defer pr.Close()
		sess.AddBuildIDs(pr.Meta().BuildIDs)
		log, err = correlate.ReadPerf(pr, filter, sess)
	} else {
		log, err = correlate.ReadFtrace(br, filter)
	}
	if err != nil {
		return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: %w", displayName(name), err)}
	}
	return log, nil
}

// writeTo writes to a new file, or to standard output for "-".
func writeTo(env *Env, name string, fn func(io.Writer) error) error {
	if name == "-" {
		return fn(env.Stdout)
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return f.Close()
}
