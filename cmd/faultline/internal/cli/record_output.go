package cli

import (
	"errors"
	"fmt"
	"os"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
)

// outputFile is the recording being written (rec.Output: -o's file,
// device, FIFO or standard output).
type outputFile = rec.Output

// createOutput starts -o's output (rec.CreateOutput); what the user can
// fix is a prerequisite error.
func (r *recorder) createOutput() (*outputFile, error) {
	if r.opts.every > 0 {
		return r.startWindows() // --every: no recording file
	}
	o, err := rec.CreateOutput(r.opts.output, rec.OutputEnv{Sys: r.sys, Stdout: r.env.Stdout,
		Logf: r.logf, Note: func(err error) { r.notes.add(err) }})
	if se := (*rec.SetupError)(nil); errors.As(err, &se) {
		return nil, prereqError("%v", se.Err)
	}
	return o, err
}

// giveToInvoker hands the recording to the user who ran sudo
// (rec.GiveToInvoker); a failure is a note.
func (r *recorder) giveToInvoker(f *os.File) {
	if uid, err := rec.GiveToInvoker(r.sys, f); err != nil {
		r.notes.add(fmt.Errorf("could not give %s to the sudo user (uid %d): %v; read it with sudo", r.opts.output, uid, err))
	}
}
