package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/spf13/pflag"
)

// symbolizeFlags are the flags every command that names frames takes, with
// perf's spellings.
type symbolizeFlags struct {
	symfs, buildIDDir, kallsyms string
	symfsFallback               bool
	allowMismatch, noDebuginfod bool
}

func addSymbolizeFlags(fs *pflag.FlagSet) *symbolizeFlags {
	o := &symbolizeFlags{}
	fs.StringVar(&o.symfs, "symfs", "", "look for binaries and debug files only under `DIR`, a copy of the recording machine's files (perf's --symfs); see --symfs-fallback")
	fs.BoolVar(&o.symfsFallback, "symfs-fallback", false, "with --symfs, also search this machine's files after DIR (the recorded paths, /usr/lib/debug, ~/.debug), as perf does")
	fs.StringVar(&o.buildIDDir, "buildid-dir", "", "perf's build-id cache `DIR` (default $PERF_BUILDID_DIR or ~/.debug)")
	fs.StringVar(&o.kallsyms, "kallsyms", "", "name kernel frames from `FILE`, a copy of /proc/kallsyms")
	fs.BoolVar(&o.allowMismatch, "allow-mismatch", false, "name and unwind frames with a file that is not the binary that ran (another build ID, or a replaced inode) when the one that ran is nowhere; by default such frames are left unnamed and counted")
	fs.BoolVar(&o.noDebuginfod, "no-debuginfod", false, "never download debug info from the servers in $DEBUGINFOD_URLS (without that variable nothing is downloaded anyway)")
	return o
}

func (o *symbolizeFlags) config() symbolize.Config {
	return symbolize.Config{Symfs: o.symfs, SymfsFallback: o.symfsFallback, BuildIDDir: o.buildIDDir, Kallsyms: o.kallsyms,
		AllowMismatch: o.allowMismatch, NoDebuginfod: o.noDebuginfod}
}

// debuginfodProgress reports downloads from debuginfod servers that are
// big (over 4 MB) or slow (over 2 s): a line a second while one runs and
// one when it ends. Nothing under quiet.
func debuginfodProgress(env *Env, quiet bool) func(url string, done, total int64) {
	if quiet {
		return nil
	}
	type dl struct {
		start, last time.Time
		shown       bool
	}
	var mu sync.Mutex
	runs := map[string]*dl{}
	return func(url string, done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		d := runs[url]
		if d == nil {
			d = &dl{start: now}
			runs[url] = d
		}
		if done == total {
			if d.shown {
				fmt.Fprintf(env.Stderr, "faultline: debuginfod: %s: %.1f MB in %.1f s\n", url, float64(done)/1e6, now.Sub(d.start).Seconds())
			}
			delete(runs, url)
			return
		}
		if !d.shown && total < 4e6 && now.Sub(d.start) < 2*time.Second || now.Sub(d.last) < time.Second {
			return
		}
		d.shown, d.last = true, now
		of := ""
		if total > 0 {
			of = fmt.Sprintf(" of %.1f MB", float64(total)/1e6)
		}
		fmt.Fprintf(env.Stderr, "faultline: debuginfod: downloading %s: %.1f MB%s\n", url, float64(done)/1e6, of)
	}
}

// openRecording opens a perf.data file, or reads a pipe-mode recording from
// standard input for "-". Errors are one line saying what the input is.
func openRecording(env *Env, name string, opts *perfdata.Options) (*perfdata.Reader, error) {
	if name == "-" {
		r, err := perfdata.NewStream(env.Stdin, opts)
		if err != nil {
			if errors.Is(err, perfdata.ErrNotPerfData) {
				return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("standard input is not a pipe-mode perf.data stream (%v); record with: perf record -o - ... | faultline analyze -", err)}
			}
			return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("standard input: %w", err)}
		}
		return r, nil
	}
	r, err := perfdata.Open(name, opts)
	if err != nil {
		return nil, &ExitError{Code: ExitFailure, Err: openError(name, err)}
	}
	return r, nil
}

// newFlagSet returns a subcommand's flag set. Parse errors are returned, not
// printed: parseFlags turns them into one-line usage errors.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses a subcommand's arguments the same way for every
// command. -h/--help prints help, then the flag list, to standard output
// and reports done (the command ends with exit status 0); a bad flag is a
// usage error (exit 2) naming the command. help should end with "Flags:\n".
func parseFlags(env *Env, fs *pflag.FlagSet, help string, args []string) (done bool, err error) {
	if fs.Lookup("help") == nil {
		fs.BoolP("help", "h", false, "show this help")
	}
	// pflag calls Usage before returning ErrHelp and on some errors.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err = fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) || err == nil && boolFlag(fs, "help") {
		io.WriteString(env.Stdout, help+flagUsages(fs))
		return true, nil
	}
	if err != nil {
		return true, usageError("%s: %v; run 'faultline %s --help'", fs.Name(), err, fs.Name())
	}
	return false, nil
}

func boolFlag(fs *pflag.FlagSet, name string) bool {
	v, err := fs.GetBool(name)
	return err == nil && v
}

// hideDefault keeps --help from showing a flag's default value, for flags
// whose zero value is a placeholder the usage explains.
func hideDefault(fs *pflag.FlagSet, name string) {
	fs.SetAnnotation(name, hideDefaultKey, []string{"true"})
}

const hideDefaultKey = "faultline/hide-default"

// flagUsages lists fs's flags for --help, wrapped at 80 columns: pflag's own
// FlagUsages writes "--quiet[=true|false]" for booleans and does not wrap.
func flagUsages(fs *pflag.FlagSet) string {
	type row struct{ left, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		left := "      --" + f.Name
		if f.Shorthand != "" {
			left = "  -" + f.Shorthand + ", --" + f.Name
		}
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" {
			left += " " + varname
		}
		def := f.DefValue
		if f.Annotations[hideDefaultKey] != nil {
			def = ""
		}
		switch def {
		case "", "0", "false", "[]", "0s":
		default:
			if f.Value.Type() == "string" {
				def = strconv.Quote(def)
			}
			usage += " (default " + def + ")"
		}
		rows = append(rows, row{left, usage})
		width = max(width, len(left))
	})
	var b strings.Builder
	col := width + 3
	for _, r := range rows {
		b.WriteString(r.left)
		pad := col - len(r.left)
		line := col
		for i, word := range strings.Fields(r.usage) {
			switch {
			case i == 0:
				b.WriteString(strings.Repeat(" ", pad))
			case line+1+len(word) > 80:
				b.WriteString("\n" + strings.Repeat(" ", col))
				line = col
			default:
				b.WriteByte(' ')
				line++
			}
			b.WriteString(word)
			line += len(word)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// newProgress returns a progress callback (file offset read so far) and a
// function to end it. The bar is drawn on stderr only when stderr is a
// terminal, the input is a file larger than 64 MiB, and quiet is off;
// otherwise both functions do nothing.
func newProgress(env *Env, name string, quiet bool, what string) (func(int64), func()) {
	if quiet || !env.StderrIsTerminal || name == "-" {
		return nil, func() {}
	}
	fi, err := os.Stat(name)
	if err != nil || fi.Size() <= 64<<20 {
		return nil, func() {}
	}
	bar := progressbar.NewOptions64(fi.Size(),
		progressbar.OptionSetWriter(env.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionThrottle(100*time.Millisecond),
		// Bytes read and the rate (MB/s): how fast the pipeline runs.
		progressbar.OptionShowBytes(true),
		progressbar.OptionClearOnFinish())
	// Records arrive in time order, so offsets can step back a little.
	var last int64
	return func(off int64) {
		if off > last {
			last = off
			bar.Set64(off)
		}
	}, func() { bar.Finish() }
}

// summaryWriter is where a command's summary goes: standard output, unless
// one of outputs is "-" and standard output carries that data alone.
func summaryWriter(env *Env, outputs ...string) io.Writer {
	for _, o := range outputs {
		if o == "-" {
			return env.Stderr
		}
	}
	return env.Stdout
}
