// Package cli implements the faultline command's subcommands. Each
// subcommand lives in its own file and is listed in commands; Main parses
// the first argument and dispatches. Nothing here exits the process: Main
// returns the exit status so tests can run commands in-process.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/term"
)

// Version is the faultline version printed by --version (set with -ldflags
// "-X github.com/faultline/faultline/cmd/faultline/internal/cli.Version=...").
var Version = "0.1.0-dev"

// Exit statuses, documented in --help (and so in docs/cli.md) and the README.
const (
	ExitOK         = 0 // success
	ExitRegression = 1 // diff: a site regressed past the threshold
	ExitFailure    = 2 // bad usage, unreadable or unusable input (record: ExitRecordFailed)

	// record's own, as env(1), nice(1) and timeout(1) have them; otherwise
	// record exits with the recorded program's status.
	ExitRecordFailed  = 125 // record failed: bad usage, output, libc, the recording itself
	ExitCannotExecute = 126 // the program was found but cannot be executed
	ExitNotFound      = 127 // the program was not found
)

// Env is the outside world a command sees; tests substitute buffers.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// StderrIsTerminal enables progress bars.
	StderrIsTerminal bool
}

// StdEnv returns the process's real standard streams.
func StdEnv() *Env {
	return &Env{
		Stdin:            os.Stdin,
		Stdout:           os.Stdout,
		Stderr:           os.Stderr,
		StderrIsTerminal: term.IsTerminal(int(os.Stderr.Fd())),
	}
}

// command is one subcommand.
type command struct {
	name    string
	summary string // one line for the command list
	run     func(env *Env, args []string) error
}

// commands lists every subcommand in the order help prints them. It is a
// function, not a variable, because a command's run reaches back to it
// (help), which a variable's initializer could not.
func commands() []*command {
	return []*command{
		{name: "analyze", summary: "attribute every page fault to the allocation it touched; write a pprof profile", run: runAnalyze},
		{name: "correlate", summary: "join a Pin memory-access log with a page-fault log: which access caused each fault", run: runCorrelate},
		{name: "diff", summary: "compare two profiles per allocation site; exit 1 on a regression", run: runDiff},
		{name: "info", summary: "describe a perf.data recording: command, host, events, samples, losses", run: runInfo},
		{name: "push", summary: "send a profile to Grafana Pyroscope (push API), with labels", run: runPush},
		{name: "record", summary: "record a program's allocations and page faults (no perf needed)", run: runRecord},
		{name: "script", summary: "print every sample with its unwound, symbolized stack (perf script's layout)", run: runScript},
		{name: "timeline", summary: "draw resident memory over time, stacked by site, as SVG or HTML", run: runTimeline},
	}
}

// helpTopics are the subjects of 'faultline help TOPIC' that are not commands.
var helpTopics = map[string]string{
	"debuginfo": debuginfoHelp,
}

// lookup returns the subcommand called name.
func lookup(name string) (*command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return nil, false
}

// ExitError carries a specific exit status out of a command.
type ExitError struct {
	Code int
	Err  error // nil: exit silently with Code
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// usageError marks bad command-line usage (exit 2).
func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf(format, args...)}
}

// Main runs the faultline command line and returns the exit status.
func Main(args []string, env *Env) int {
	if len(args) == 0 {
		// Bad usage: the command list goes where errors go.
		printUsage(env.Stderr)
		return ExitFailure
	}
	switch args[0] {
	case "-h", "--help", "help":
		if len(args) == 1 || args[0] != "help" {
			printUsage(env.Stdout)
			return ExitOK
		}
		if len(args) > 2 {
			fmt.Fprintf(env.Stderr, "faultline: help takes one command, got %q\n", args[1:])
			return ExitFailure
		}
		if args[1] == "help" {
			printUsage(env.Stdout)
			return ExitOK
		}
		if topic, ok := helpTopics[args[1]]; ok {
			fmt.Fprint(env.Stdout, topic)
			return ExitOK
		}
		c, ok := lookup(args[1])
		if !ok {
			fmt.Fprintf(env.Stderr, "faultline: help: unknown command %q (nor a help topic); run 'faultline --help' for the list\n", args[1])
			return ExitFailure
		}
		return finish(env, c.run(env, []string{"--help"}))
	case "-V", "--version", "version":
		fmt.Fprintln(env.Stdout, versionString())
		return ExitOK
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(env.Stderr, "faultline: unknown command %q; run 'faultline --help' for the list\n", args[0])
		return ExitFailure
	}
	return finish(env, c.run(env, args[1:]))
}

// versionString is Version with what the Go toolchain recorded about the
// build: "faultline 0.1.0-dev (go1.26.8 linux/amd64, commit 0123abcd4567, modified)".
func versionString() string {
	extra := []string{runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			extra = append(extra, "commit "+rev[:min(len(rev), 12)])
			if modified == "true" {
				extra = append(extra, "modified")
			}
		}
	}
	return fmt.Sprintf("faultline %s (%s)", Version, strings.Join(extra, ", "))
}

func finish(env *Env, err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(env.Stderr, "faultline: %s\n", withAdvice(ee.Err))
		}
		return ee.Code
	}
	fmt.Fprintf(env.Stderr, "faultline: %s\n", withAdvice(err))
	return ExitFailure
}

func printUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString(`faultline: which allocation in my program caused these page faults?

faultline reads a perf.data recording of a program's allocator calls (malloc
and friends) and page faults — made by 'faultline record', or by perf with
uprobes and --call-graph dwarf — unwinds and symbolizes the stacks, joins each
page fault to the live allocation whose bytes it touched, and writes a pprof
profile.

Usage: faultline <command> [flags] [args]
       faultline help <command>     (or faultline <command> --help)
       faultline --version

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Help topics (faultline help TOPIC):
  debuginfo what names frames, where faultline looks for debug info
`)
	b.WriteString(`
Example (a recording shipped with faultline; no root or perf needed):

  faultline analyze --symfs testdata/symfs testdata/perf/basic.plain.data -o faults.pb.gz
  go tool pprof -top faults.pb.gz

Your own program (as any user where kernel.perf_event_paranoid is 2 or less;
record needs root where it falls back to uprobes: faultline help record):

  faultline record -o app.data -- ./app ARGS
  faultline analyze app.data -o faults.pb.gz

Run 'faultline help <command>' for a command's flags and an example.

Exit status:
  0  success
  1  diff: a site regressed past the threshold
  2  bad usage, unreadable or unusable input
  record: the program's own status; 125 when record fails (bad usage, a
  missing prerequisite such as root or tracefs), 126 when the program
  cannot be executed, 127 when it is not found (faultline help record)
`)
	io.WriteString(w, b.String())
}
