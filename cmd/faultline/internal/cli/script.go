package cli

import (
	"bufio"
	"runtime"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/spf13/pflag"
)

const scriptHelp = `Usage: faultline script [flags] FILE|-

Prints every sample of a perf.data recording with its user stack, unwound
from the recorded registers and stack copy with the binaries' DWARF CFI and
named from their symbols and debug info, in the layout of

  perf script -F comm,pid,tid,time,event,addr,ip,sym,dso,trace

so stackcollapse-perf.pl, FlameGraph and speedscope read it unchanged.
FILE "-" reads a pipe-mode recording from standard input.

Example:

  faultline script --symfs testdata/symfs testdata/perf/basic.plain.data | head
  faultline script --no-inline --event page-faults:u perf.data > stacks.txt

Flags:
`

func runScript(env *Env, args []string) error {
	fs := pflag.NewFlagSet("script", pflag.ContinueOnError)
	noInline := fs.Bool("no-inline", false, "do not print inlined frames")
	event := fs.String("event", "", "print only samples of event `NAME` (as faultline info names it)")
	symOpts := addSymbolizeFlags(fs)
	fileOrder := fs.Bool("file-order", false, "print records in file order instead of time order")
	jobs := fs.IntP("jobs", "j", 0, "unwind stacks on `N` goroutines beside the decoding one (0: one per CPU, GOMAXPROCS; 1: everything on one); the output is the same for any N")
	quiet := fs.BoolP("quiet", "q", false, "no progress bar and no warnings: only errors on standard error")
	verbose := fs.BoolP("verbose", "v", false, "print every warning in full (where debug info was looked for, ...)")
	if done, err := parseFlags(env, fs, scriptHelp, args); done {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("script: want one recording (FILE or - for stdin); see 'faultline script --help'")
	}
	if *jobs < 0 {
		return usageError("script: --jobs %d: want 0 (one per CPU) or a positive count", *jobs)
	}
	opts := &perfdata.Options{}
	if *fileOrder {
		opts.Order = perfdata.FileOrder
	}
	r, err := openRecording(env, fs.Arg(0), opts)
	if err != nil {
		return err
	}
	defer r.Close()
	sess, err := symbolize.NewSession(symOpts.config(), r.Meta())
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	defer sess.Close()

	progress, done := newProgress(env, fs.Arg(0), *quiet, "unwinding")
	defer done()
	var n uint64
	out := bufio.NewWriterSize(env.Stdout, 1<<20)
	w := &symbolize.ScriptWriter{S: sess, Inline: !*noInline}
	nBuildIDs := 0
	wanted := func(smp *perfdata.Sample) bool {
		return *event == "" || smp.Event != nil && smp.Event.Name == *event
	}
	next, record := r.Next, r.Record
	unwind := func(smp *perfdata.Sample) symbolize.StackID {
		id, _ := sess.Unwind(smp, true)
		return id
	}
	if n := *jobs; n != 1 && !r.Meta().PipeMode {
		// A file's events are known up front: walk the stacks ahead on
		// every core, print in order.
		if n == 0 {
			n = runtime.GOMAXPROCS(0)
		}
		if n > 1 {
			p := sess.NewPipeline(r, n, wanted)
			nBuildIDs = len(r.Meta().BuildIDs) // added by NewPipeline
			defer p.Close()
			next, record = p.Next, p.Record
			unwind = func(*perfdata.Sample) symbolize.StackID { return sess.Intern(p.Walk(), true) }
		}
	}
	for next() {
		if n++; progress != nil && n&0xfff == 0 {
			progress(record().Common().Offset)
		}
		switch rec := record().(type) {
		case *perfdata.Sample:
			if !wanted(rec) {
				continue
			}
			if w.NameWidth == 0 {
				if err := sess.CheckArch(); err != nil {
					return &ExitError{Code: ExitFailure, Err: err}
				}
				for _, ev := range r.Events() {
					w.NameWidth = max(w.NameWidth, len(ev.Name))
				}
			}
			if ids := r.Meta().BuildIDs; len(ids) != nBuildIDs {
				sess.AddBuildIDs(ids[nBuildIDs:])
				nBuildIDs = len(ids)
			}
			stack := unwind(rec)
			if _, err := out.Write(w.Format(rec, stack)); err != nil {
				return err
			}
		default:
			sess.Observe(rec)
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if !*quiet {
		var nt notes
		nt.add(r.Warnings()...)
		nt.drop(r.WarningCount() - len(r.Warnings()))
		nt.add(sess.Warnings()...)
		nt.write(env.Stderr, *verbose)
	}
	if err := r.Err(); err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	return nil
}
