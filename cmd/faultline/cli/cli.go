// Package cli implements the faultline command's subcommands. Each
// subcommand lives in its own file and registers itself in init; Main parses
// the first argument and dispatches. Nothing here exits the process: Main
// returns the exit status so tests can run commands in-process.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/term"
)

// Version is the faultline version printed by --version (set with -ldflags
// "-X github.com/faultline/faultline/cmd/faultline/cli.Version=...").
var Version = "0.1.0-dev"

// Exit statuses, documented in --help and the README.
const (
	ExitOK         = 0 // success
	ExitRegression = 1 // diff: a site regressed past the threshold
	ExitFailure    = 2 // bad usage, unreadable or unusable input, missing prerequisite
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

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

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
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) > 1 && args[0] == "help" {
			if c, ok := commands[args[1]]; ok {
				return finish(env, c.run(env, []string{"--help"}))
			}
		}
		printUsage(env.Stdout)
		if len(args) == 0 {
			return ExitFailure
		}
		return ExitOK
	}
	if args[0] == "--version" || args[0] == "version" {
		fmt.Fprintf(env.Stdout, "faultline %s\n", Version)
		return ExitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "faultline: unknown command %q; run 'faultline --help' for the list\n", args[0])
		return ExitFailure
	}
	return finish(env, c.run(env, args[1:]))
}

func finish(env *Env, err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(env.Stderr, "faultline: %v\n", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintf(env.Stderr, "faultline: %v\n", err)
	return ExitFailure
}

func printUsage(w io.Writer) {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(`faultline: which allocation in my program caused these page faults?

faultline reads a perf.data recording made with uprobes on malloc and the
page-faults:u event (with --call-graph dwarf), unwinds and symbolizes every
stack, joins each page fault to the live allocation whose bytes it touched,
and writes a pprof profile.

Usage: faultline <command> [flags] [args]

Commands:
`)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-9s %s\n", n, commands[n].summary)
	}
	b.WriteString(`
Run 'faultline <command> --help' for a command's flags and an example.

Exit status: 0 success; 1 'diff' found a regression past the threshold;
2 bad usage, unreadable input or a missing prerequisite.
`)
	io.WriteString(w, b.String())
}
