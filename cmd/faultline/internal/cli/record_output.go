package cli

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	rec "github.com/faultline/faultline/cmd/faultline/internal/recorder"
	"github.com/faultline/faultline/perfdata"
)

// outputFile is the recording being written. record runs as root, so it
// never opens a regular output by its name: it writes a new file of its
// own and renames it into place at the end, and hands that descriptor,
// not a path, to the sudo user. The new file is unnamed (O_TMPFILE) until
// the recording is complete, so a record killed with SIGKILL leaves
// nothing behind; where the filesystem has no O_TMPFILE it is a named
// O_EXCL temporary, flock'ed while it lives, which the next run in that
// directory removes (removeStaleTemps). The output's path is looked up
// once, by rec.ResolveOutput, which follows only root's and the invoking
// user's links and refuses another user's FIFO or device; everything after
// goes through the directory it found. A symlink at the output name is
// replaced, never followed into a regular file. An output that is a device
// node or a FIFO (or a trusted link to one) is written into, as perf record
// -o does, never replaced or chowned: file-mode perf.data needs a seekable
// file, so the recording is spooled to an unlinked temporary file and
// copied there at the end. For "-o -" the recording streams to standard
// output in pipe mode, as perf record -o - writes it, so that a reader can
// start at once (a file named "-" is never created).
type outputFile struct {
	f      *os.File  // the file being written (temporary or spool); nil for stdout
	w      io.Writer // what the recorder writes to
	tmp    string    // temporary name in the target directory ("" when unnamed, spooled or streamed)
	dir    string    // the target directory, when f is unnamed (O_TMPFILE) there
	final  string
	stdout bool
	// special is the device node or FIFO written into; sink its
	// descriptor once open (a FIFO without a reader yet is opened at
	// commit).
	special string
	sink    *os.File
	// path holds the resolved directory or special file open until the
	// output is finished (nil for stdout).
	path *rec.OutputPath
	done bool
}

func (r *recorder) createOutput() (*outputFile, error) {
	o := &outputFile{final: r.opts.output}
	if r.opts.output == "-" {
		o.w, o.stdout = r.env.Stdout, true
		return o, nil
	}
	p, err := rec.ResolveOutput(r.opts.output, r.trustedUIDs())
	if refusal := (*rec.OutputRefusal)(nil); errors.As(err, &refusal) {
		return nil, prereqError("%v", err)
	} else if err != nil {
		return nil, prereqError("cannot create the output: %v", err)
	}
	o.path = p
	if p.Special != nil {
		if err := o.openSpecial(); err != nil {
			p.Close()
			return nil, err
		}
		return o, o.spool()
	}
	if err := checkReplaceable(p.FinalName(), r.opts.output); err != nil {
		p.Close()
		return nil, err
	}
	dir, shown := p.DirName(), filepath.Dir(r.opts.output)
	if n, err := removeStaleTemps(dir); n > 0 {
		r.logf("removed %d temporary files of recordings that did not finish in %s", n, shown)
	} else if err != nil {
		r.notes.add(fmt.Errorf("looking for temporary files of unfinished recordings in %s: %v", shown, err))
	}
	// O_TMPFILE makes a new inode in dir with no name; mode 0600.
	if fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600); err == nil {
		f := os.NewFile(uintptr(fd), r.opts.output)
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			p.Close()
			return nil, prereqError("cannot lock the output's temporary file in %s: %v", shown, err)
		}
		o.f, o.w, o.dir = f, f, dir
		return o, nil
	}
	// CreateTemp opens with O_CREAT|O_EXCL and mode 0600: a new file that
	// only we can have made.
	f, err := os.CreateTemp(dir, tempPattern(r.opts.output))
	if err != nil {
		p.Close()
		return nil, prereqError("cannot create the output in %s: %v", shown, err)
	}
	// The lock lives as long as this process: a later run that can take
	// it knows the file is a dead run's (removeStaleTemps).
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(f.Name())
		p.Close()
		return nil, prereqError("cannot lock the output's temporary file in %s: %v", shown, err)
	}
	o.f, o.w, o.tmp = f, f, f.Name()
	return o, nil
}

// trustedUIDs are the users whose links record follows and whose FIFOs
// and devices it writes into: root, this process's user and, under sudo,
// the user who ran it.
func (r *recorder) trustedUIDs() []int {
	uids := []int{0}
	if euid := r.sys.Geteuid(); euid != 0 {
		return append(uids, euid)
	}
	if uid, err := strconv.Atoi(r.sys.Getenv("SUDO_UID")); err == nil && uid != 0 {
		uids = append(uids, uid)
	}
	return uids
}

// spool makes the unlinked temporary file a streamed output is written to
// first.
func (o *outputFile) spool() error {
	f, err := os.CreateTemp("", "faultline-record-*.data")
	if err != nil {
		if o.sink != nil {
			o.sink.Close()
		}
		return prereqError("creating a spool file for %s: %v (set TMPDIR to a writable directory)", o.streamName(), err)
	}
	os.Remove(f.Name()) // unlinked: gone with the descriptor
	o.f, o.w = f, f
	return nil
}

func (o *outputFile) streamName() string {
	if o.stdout {
		return "standard output"
	}
	return o.final
}

// openSpecial opens the device node or FIFO the output names (or the file
// /dev/stdout leads to) for writing, now, so that a refusal comes before the program runs: the
// inode ResolveOutput found, whatever its name points at by now.
func (o *outputFile) openSpecial() error {
	m := o.path.Mode
	o.special = o.final
	flags := 0
	switch {
	case m&os.ModeNamedPipe != 0:
		flags = unix.O_NONBLOCK
	case m.IsRegular(): // standard output redirected to a file
		flags = unix.O_TRUNC
	}
	f, err := o.path.ReopenSpecial(flags)
	if err == unix.ENXIO && m&os.ModeNamedPipe != 0 {
		// A FIFO nobody reads yet: opened (and waited for) at the end.
		if err := unix.Access(o.path.FinalName(), unix.W_OK); err != nil {
			return prereqError("-o %s: FIFO not writable: %v", o.final, err)
		}
		return nil
	}
	if err != nil {
		return prereqError("-o %s: cannot open the %s for writing: %v", o.final, specialKind(m), err)
	}
	if m&os.ModeNamedPipe != 0 {
		if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
			f.Close()
			return fmt.Errorf("-o %s: %v", o.final, err)
		}
	}
	o.sink = f
	return nil
}

func specialKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m.IsRegular():
		return "file"
	}
	return "block device"
}

// checkReplaceable refuses, before anything runs, an existing regular
// output that the final rename would either replace against its owner's
// wish (no write permission bits: read-only) or fail on at the end
// (immutable or append-only, chattr +i / +a).
func checkReplaceable(path, shown string) error {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil // nothing there, or a symlink (replaced, never followed)
	}
	if fi.Mode().Perm()&0o222 == 0 {
		return prereqError("-o %s exists and is read-only (mode %04o): remove it, make it writable (chmod u+w) or choose another -o", shown, fi.Mode().Perm())
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // the rename decides
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err == nil && flags&(fsImmutableFL|fsAppendFL) != 0 {
		return prereqError("-o %s is immutable or append-only (lsattr shows i or a): it cannot be replaced; chattr -i -a it or choose another -o", shown)
	}
	return nil
}

// Inode flags of FS_IOC_GETFLAGS (include/uapi/linux/fs.h).
const (
	fsImmutableFL = 0x10 // FS_IMMUTABLE_FL
	fsAppendFL    = 0x20 // FS_APPEND_FL
)

// tempPattern is os.CreateTemp's pattern of the temporary names of output.
func tempPattern(output string) string { return "." + filepath.Base(output) + ".*.tmp" }

// staleTemp matches the temporary names createOutput makes:
// "." + output name + "." + random digits + ".tmp".
var staleTemp = regexp.MustCompile(`^\..+\.[0-9]+\.tmp$`)

// removeStaleTemps removes the temporary files that runs of record killed
// before they finished (kill -9, a crash) left in dir. A file is a dead
// run's when its name is one createOutput makes, it is a regular file of
// this user holding a perf.data header, and its flock is free: a live run
// holds the lock until it exits. It returns how many it removed.
func removeStaleTemps(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() || !staleTemp.MatchString(e.Name()) {
			continue
		}
		if removeIfStale(filepath.Join(dir, e.Name())) {
			n++
		}
	}
	return n, nil
}

func removeIfStale(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
		return false
	}
	var magic [8]byte
	if n, _ := unix.Pread(fd, magic[:], 0); n != len(magic) || string(magic[:]) != perfdata.MagicLE {
		return false
	}
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false // a live run's
	}
	return os.Remove(path) == nil
}

// commit finishes the output: hands the file to the sudo user, then renames
// it into place (or copies it out to the device or the FIFO; standard
// output has had everything already).
func (o *outputFile) commit(r *recorder) error {
	if o.stdout {
		o.done = true // streamed as it was written
		return nil
	}
	if o.tmp == "" && o.dir == "" {
		return o.copyOut(r)
	}
	r.giveToInvoker(o.f)
	if o.dir != "" {
		// The unnamed file gets a temporary name, then the final one.
		tmp, err := linkTemp(o.f, o.dir, o.final)
		if err != nil {
			return fmt.Errorf("naming the recording in %s: %v", filepath.Dir(o.final), err)
		}
		o.tmp = tmp
	}
	if err := o.f.Close(); err != nil {
		return fmt.Errorf("writing %s: %v", o.final, err)
	}
	// rename(2) replaces the name itself: an existing symlink is replaced,
	// not followed.
	if err := os.Rename(o.tmp, o.path.FinalName()); err != nil {
		os.Remove(o.tmp)
		return fmt.Errorf("moving the recording into place: %v", err)
	}
	o.path.Close()
	o.done = true
	return nil
}

// linkTemp gives the unnamed file f (O_TMPFILE) in dir a new temporary
// name for output, as CreateTemp would name it, and returns the name.
// linkat through /proc/self/fd needs no privilege (AT_EMPTY_PATH would
// need CAP_DAC_READ_SEARCH); an existing name is never replaced.
func linkTemp(f *os.File, dir, output string) (string, error) {
	prefix, suffix, _ := strings.Cut(tempPattern(output), "*")
	src := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	var err error
	for try := 0; try < 100; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		if err = unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW); err == nil {
			return name, nil
		}
		if err != unix.EEXIST {
			break
		}
	}
	return "", err
}

// copyOut copies the spooled recording to where it goes.
func (o *outputFile) copyOut(r *recorder) error {
	defer o.discard()
	if _, err := o.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var w io.Writer = r.env.Stdout
	if o.special != "" {
		if o.sink == nil {
			r.logf("waiting for a reader of the FIFO %s", o.special)
			f, err := o.path.ReopenSpecial(0)
			if err != nil {
				return fmt.Errorf("opening the FIFO %s: %v", o.special, err)
			}
			o.sink = f
		}
		w = o.sink
	}
	if _, err := io.Copy(w, o.f); err != nil {
		return fmt.Errorf("writing the recording to %s: %v", o.streamName(), err)
	}
	if o.sink != nil {
		if err := o.sink.Close(); err != nil {
			return fmt.Errorf("writing the recording to %s: %v", o.final, err)
		}
		o.sink = nil
	}
	return nil
}

// discard removes an unfinished output (error or interruption before the
// file was complete).
func (o *outputFile) discard() {
	if o.done || o.stdout {
		return
	}
	if o.f != nil {
		o.f.Close()
	}
	if o.sink != nil {
		o.sink.Close()
	}
	if o.tmp != "" {
		os.Remove(o.tmp)
	}
	if o.path != nil {
		o.path.Close()
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
