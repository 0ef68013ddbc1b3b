package cli

import (
	"bufio"

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
	quiet := fs.BoolP("quiet", "q", false, "no progress bar and no warnings: only errors on standard error")
	verbose := fs.BoolP("verbose", "v", false, "print every warning in full (where debug info was looked for, ...)")
	if done, err := parseFlags(env, fs, scriptHelp, args); done {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("script: want one recording (FILE or - for stdin); see 'faultline script --help'")
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
	for r.Next() {
		if n++; progress != nil && n&0xfff == 0 {
			progress(r.Record().Common().Offset)
		}
		switch rec := r.Record().(type) {
		case *perfdata.Sample:
			if *event != "" && (rec.Event == nil || rec.Event.Name != *event) {
				continue
			}
			if w.NameWidth == 0 {
				for _, ev := range r.Events() {
					w.NameWidth = max(w.NameWidth, len(ev.Name))
				}
			}
			if ids := r.Meta().BuildIDs; len(ids) != nBuildIDs {
				sess.AddBuildIDs(ids[nBuildIDs:])
				nBuildIDs = len(ids)
			}
			stack, _ := sess.Unwind(rec, true)
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
