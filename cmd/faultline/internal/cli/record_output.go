package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// outputFile is the recording being written. record runs as root, so it
// never opens the output by its name: it writes a new file of its own (an
// O_EXCL temporary in the target directory) and renames it into place at
// the end, and hands that descriptor, not a path, to the sudo user. A
// symlink planted at the output name is replaced, never followed. For
// "-o -" the recording streams to standard output in pipe mode, as perf
// record -o - writes it, so that a reader can start at once (a file named
// "-" is never created).
type outputFile struct {
	f      *os.File // the file being written; nil for stdout
	w      io.Writer
	tmp    string // temporary name in the target directory ("" for stdout)
	final  string
	stdout bool
	done   bool
}

func (r *recorder) createOutput() (*outputFile, error) {
	o := &outputFile{final: r.opts.output}
	if r.opts.output == "-" {
		o.w, o.stdout = r.env.Stdout, true
		return o, nil
	}
	dir := filepath.Dir(r.opts.output)
	if fi, err := os.Stat(r.opts.output); err == nil && fi.IsDir() {
		return nil, prereqError("-o %s is a directory; name a file", r.opts.output)
	}
	// CreateTemp opens with O_CREAT|O_EXCL and mode 0600: a new file that
	// only we can have made.
	f, err := os.CreateTemp(dir, "."+filepath.Base(r.opts.output)+".*.tmp")
	if err != nil {
		return nil, prereqError("cannot create the output in %s: %v", dir, err)
	}
	o.f, o.w, o.tmp = f, f, f.Name()
	return o, nil
}

// commit finishes the output: hands the file to the sudo user, then renames
// it into place. Standard output has had everything already.
func (o *outputFile) commit(r *recorder) error {
	if o.stdout {
		o.done = true
		return nil
	}
	r.giveToInvoker(o.f)
	if err := o.f.Close(); err != nil {
		return fmt.Errorf("writing %s: %v", o.final, err)
	}
	// rename(2) replaces the name itself: an existing symlink is replaced,
	// not followed.
	if err := os.Rename(o.tmp, o.final); err != nil {
		os.Remove(o.tmp)
		return fmt.Errorf("moving the recording into place: %v", err)
	}
	o.done = true
	return nil
}

// discard removes an unfinished output (error or interruption before the
// file was complete).
func (o *outputFile) discard() {
	if o.done || o.stdout {
		return
	}
	o.f.Close()
	if o.tmp != "" {
		os.Remove(o.tmp)
	}
	o.done = true
}

// giveToInvoker hands the recording to the user who ran sudo, through the
// descriptor we created. Written as root with mode 0600, it could otherwise
// not be read by 'faultline analyze' run without sudo (as the CI recipe
// does).
func (r *recorder) giveToInvoker(f *os.File) {
	uid, err := strconv.Atoi(r.sys.Getenv("SUDO_UID"))
	if err != nil || uid == 0 || r.sys.Geteuid() != 0 {
		return
	}
	gid, err := strconv.Atoi(r.sys.Getenv("SUDO_GID"))
	if err != nil {
		gid = -1 // leave the group
	}
	if err := r.sys.Fchown(f, uid, gid); err != nil {
		r.notes.add(fmt.Errorf("could not give %s to the sudo user (uid %d): %v; read it with sudo", r.opts.output, uid, err))
	}
}
