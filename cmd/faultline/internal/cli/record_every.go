package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/cmd/faultline/internal/pyroscope"
	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"
)

// defaultWindowDir is where --every writes its profiles without -o.
const defaultWindowDir = "faultline-windows"

// recordWindows: --every and where its profiles go.
type recordWindows struct {
	every  time.Duration
	push   *pushFlags
	labels []pyroscope.Label
	// dir is the folder of the profiles ("" with --push and no -o).
	dir string
}

// parseWindows checks --every and --push after the flags are parsed.
func (o *recordOptions) parseWindows(outputSet bool) error {
	if o.every == 0 {
		if o.push.url != "" || len(o.push.labels) > 0 {
			return usageError("record: --push sends the profiles of --every's windows; give --every D too (or push a whole recording's profile with 'faultline analyze --push')")
		}
		return nil
	}
	switch {
	case o.every < 100*time.Millisecond:
		return usageError("record: --every %v: want 100ms or more (e.g. 60s)", o.every)
	case o.output == "-":
		return usageError("record: --every writes profiles, not a recording: -o names their folder, not standard output")
	}
	labels, err := o.push.parse("record")
	if err != nil {
		return err
	}
	o.labels = labels
	o.compress = false // the stream goes to the analysis in memory
	switch {
	case outputSet:
		o.dir = o.output
	case o.push.url == "":
		o.dir = defaultWindowDir
	}
	return nil
}

// windowRun analyzes the recording as record writes it, a profile per
// --every window: written into the folder, pushed, or both.
type windowRun struct {
	r    *recorder
	dir  *os.File // the folder, open (nil: push only)
	pw   *io.PipeWriter
	done chan error
	// wall is CLOCK_REALTIME minus CLOCK_MONOTONIC (the recording's
	// clock) when record started, in ns: the profiles' times.
	wall int64
	n    int // windows made
	// pushed counts the windows pushed; notes are the analysis's own,
	// given to record's at the end (they are made on its goroutine).
	pushed   int
	notes    []error
	finished bool
}

// startWindows opens the folder and starts the analysis that reads the
// recording from the pipe out writes into.
func (r *recorder) startWindows() (*outputFile, error) {
	o := r.opts
	w := &windowRun{r: r, done: make(chan error, 1)}
	if o.dir != "" {
		if err := os.Mkdir(o.dir, 0o755); err != nil && !os.IsExist(err) {
			return nil, prereqError("--every: %v: choose another folder with -o", err)
		}
		// The folder as it is now, not whatever its name leads to later:
		// every profile is created in it by descriptor.
		fd, err := unix.Open(o.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, prereqError("--every: %s: %v (a folder, not a link to one)", o.dir, err)
		}
		w.dir = os.NewFile(uintptr(fd), o.dir)
	}
	var mono, real unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	unix.ClockGettime(unix.CLOCK_REALTIME, &real)
	w.wall = real.Nano() - mono.Nano()
	pr, pw := io.Pipe()
	w.pw = pw
	cfg := symbolize.Config{}
	if o.pid > 0 {
		if ns, err := rec.ProcessNamespaces(o.pid); err == nil && ns.OwnMount {
			// Its files as it sees them, the host's after them.
			cfg.Symfs, cfg.SymfsFallback = fmt.Sprintf("/proc/%d/root", o.pid), true
		}
	}
	go func() {
		err := w.analyze(pr, cfg)
		// The recorder must not block on a reader that stopped.
		pr.CloseWithError(fmt.Errorf("the window analysis stopped: %v", err))
		w.done <- err
	}()
	r.win = w
	return &outputFile{W: pw, Stdout: true}, nil
}

// analyze reads the pipe-mode recording and emits the windows.
func (w *windowRun) analyze(in io.Reader, cfg symbolize.Config) error {
	rd, err := perfdata.NewStream(in, nil)
	if err != nil {
		return err
	}
	defer rd.Close()
	sess, err := symbolize.NewSession(cfg, rd.Meta())
	if err != nil {
		return err
	}
	defer sess.Close()
	_, err = analyze.Run(rd, sess, analyze.Options{Workers: 1,
		Windows: &analyze.WindowOptions{Every: uint64(w.r.opts.every), Span: uint64(w.r.opts.duration), Emit: w.emit, WindowsOnly: true}})
	return err
}

// emit writes and pushes one window's profile.
func (w *windowRun) emit(win *analyze.Window) error {
	p := win.Profile
	p.TimeNanos = int64(win.Start) + w.wall
	var raw bytes.Buffer
	if err := p.Write(&raw); err != nil {
		return err
	}
	var where []string
	if w.dir != nil {
		name, err := w.write(win, raw.Bytes())
		if err != nil {
			return err
		}
		where = append(where, filepath.Join(w.dir.Name(), name))
	}
	if w.r.opts.push.url != "" {
		line, err := w.r.opts.push.push(raw.Bytes(), p, w.r.opts.labels)
		if err != nil {
			// One window's push failing (the server restarting) does
			// not end the recording: the note says how many.
			w.notes = append(w.notes, fmt.Errorf("window %d not pushed: %v", win.Index+1, err))
		} else {
			w.pushed++
			where = append(where, line)
		}
	}
	w.n++
	// What a burst of records took is handed back to the system at each
	// window's end: record's memory stays near what it holds across
	// windows, not its largest burst.
	debug.FreeOSMemory()
	w.r.logf("window %d (%s, %v): %s", win.Index+1, time.Unix(0, p.TimeNanos).UTC().Format("15:04:05"),
		time.Duration(win.End-win.Start).Round(time.Millisecond), windowTotals(p, where))
	return nil
}

// windowTotals is one window's totals and where its profile went.
func windowTotals(p *profile.Profile, where []string) string {
	total := func(typ string) int64 {
		var n int64
		if vi := report.ValueIndex(p, typ); vi >= 0 {
			for _, s := range p.Sample {
				n += s.Value[vi]
			}
		}
		return n
	}
	s := fmt.Sprintf("%d allocations, %d faults, %.1f MiB resident", total(report.SampleAllocs), total(report.SampleFaults),
		float64(total(report.SampleResidentEnd))/(1<<20))
	for _, w := range where {
		s += "; " + w
	}
	return s
}

// write creates the window's file in the folder: NNNNNN-START.pb.gz, the
// window's number from 1 and its start in UTC (20261207T101500.000Z), so
// that names sort by time; a name taken already (a run before) gets
// the next free sequence number, never replaced.
func (w *windowRun) write(win *analyze.Window, raw []byte) (string, error) {
	start := time.Unix(0, int64(win.Start)+w.wall).UTC().Format("20060102T150405.000Z")
	for seq := win.Index + 1; ; seq += 1000000 {
		name := fmt.Sprintf("%06d-%s.pb.gz", seq, start)
		fd, err := unix.Openat(int(w.dir.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("creating %s in %s: %v", name, w.dir.Name(), err)
		}
		f := os.NewFile(uintptr(fd), name)
		_, err = f.Write(raw)
		if uid, gerr := rec.GiveToInvoker(w.r.sys, f); gerr != nil && err == nil {
			err = fmt.Errorf("giving %s to the sudo user (uid %d): %v", name, uid, gerr)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return name, err
	}
}

// endWindows ends --every's analysis, if any, after the recording
// (recordErr: its error): the last window is written.
func (r *recorder) endWindows(recordErr error) error {
	if r.win == nil || r.win.finished {
		return nil
	}
	if err := r.win.finish(recordErr); err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("record: %v", err)}
	}
	return nil
}

// finish ends the stream (recordErr: the recording's own error, if any)
// and waits for the last window.
func (w *windowRun) finish(recordErr error) error {
	if recordErr != nil {
		w.pw.CloseWithError(recordErr)
	} else {
		w.pw.Close()
	}
	err := <-w.done
	w.finished = true
	for _, n := range w.notes {
		w.r.notes.add(n)
	}
	if w.dir != nil {
		w.dir.Close()
	}
	if err != nil && recordErr == nil {
		return fmt.Errorf("analyzing the windows: %w", err)
	}
	return nil
}

// summary is record's line for the windows.
func (w *windowRun) summary() string {
	o := w.r.opts
	s := strconv.Itoa(w.n) + " window profiles (one per " + o.every.String() + ")"
	if w.n == 1 {
		s = "1 window profile (of " + o.every.String() + " at most)"
	}
	if w.dir != nil {
		s += " written into " + w.dir.Name()
	}
	if o.push.url != "" {
		s += fmt.Sprintf(", %d pushed", w.pushed)
	}
	return s
}

// windowTail is how long record runs past --duration with --every: the
// last window closes on a record past its end (the windows end at
// --duration exactly, WindowOptions.Span, and what comes after is read
// and not counted), so it is whole even when the process made no call
// or fault in its last milliseconds.
func (r *recorder) windowTail() time.Duration {
	if r.opts.every <= 0 || r.opts.duration <= 0 {
		return 0
	}
	return min(r.opts.every/10, 100*time.Millisecond)
}
