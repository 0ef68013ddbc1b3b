package recorder

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

	"github.com/faultline/faultline/perfdata"
)

// Output is the recording being written. record runs as root, so it
// never opens a regular output by its name: it writes a new file of its
// own and renames it into place at the end, and hands that descriptor,
// not a path, to the sudo user. The new file is unnamed (O_TMPFILE) until
// the recording is complete, so a record killed with SIGKILL leaves
// nothing behind; where the filesystem has no O_TMPFILE it is a named
// O_EXCL temporary, flock'ed while it lives, which the next run in that
// directory removes (removeStaleTemps). The output's path is looked up
// once, by ResolveOutput, which follows only root's and the invoking
// user's links and refuses another user's FIFO or device; everything after
// goes through the directory it found. A symlink at the output name is
// replaced, never followed into a regular file. An output that is a device
// node or a FIFO (or a trusted link to one) is written into, as perf record
// -o does, never replaced or chowned: file-mode perf.data needs a seekable
// file, so the recording is spooled to an unlinked temporary file and
// copied there at the end. For "-o -" the recording streams to standard
// output in pipe mode, as perf record -o - writes it, so that a reader can
// start at once (a file named "-" is never created).
type Output struct {
	// W is what the recording is written to; Stdout: it streams to
	// standard output ("-o -"); Special: the device node or FIFO written
	// into.
	W       io.Writer
	Stdout  bool
	Special string
	f       *os.File // the file being written (temporary or spool); nil for stdout
	tmp     string   // temporary name in the target directory ("" when unnamed, spooled or streamed)
	dir     string   // the target directory, when f is unnamed (O_TMPFILE) there
	final   string
	// sink is the special file's descriptor once open (a FIFO without a
	// reader yet is opened at commit).
	sink *os.File
	// path holds the resolved directory or special file open until the
	// output is finished (nil for stdout).
	path *OutputPath
	done bool
	env  OutputEnv
}

// File is the file being written: the new file, or the spool of a
// device, FIFO or standard output written at the end; nil when streaming
// to standard output.
func (o *Output) File() *os.File { return o.f }

// OutputEnv is what the output needs of the command around it.
type OutputEnv struct {
	Sys    System
	Stdout io.Writer // the command's standard output (-o -)
	// Logf says what the output does that a user may wonder about
	// (temporary files removed, waiting for a FIFO's reader); Note takes
	// a warning.
	Logf func(format string, args ...any)
	Note func(error)
}

// SetupError is a recording that cannot start for want of something the
// user can give (a writable output, a free lock): Err says what.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// setupError is a *SetupError of a formatted message.
func setupError(format string, args ...any) error {
	return &SetupError{fmt.Errorf(format, args...)}
}

// CreateOutput starts the output name (-o): "-" is standard output; a
// device node or FIFO is opened now and written through a spool file; a
// regular output is a new file of our own, renamed into place by Commit.
// A want the user can fix is a *SetupError.
func CreateOutput(name string, env OutputEnv) (*Output, error) {
	o := &Output{final: name, env: env}
	if name == "-" {
		o.W, o.Stdout = env.Stdout, true
		return o, nil
	}
	p, err := ResolveOutput(name, trustedUIDs(env.Sys))
	if refusal := (*OutputRefusal)(nil); errors.As(err, &refusal) {
		return nil, setupError("%v", err)
	} else if err != nil {
		return nil, setupError("cannot create the output: %v", err)
	}
	o.path = p
	if p.Special != nil {
		if err := o.openSpecial(); err != nil {
			p.Close()
			return nil, err
		}
		return o, o.spool()
	}
	if err := checkReplaceable(p.FinalName(), name); err != nil {
		p.Close()
		return nil, err
	}
	dir, shown := p.DirName(), filepath.Dir(name)
	if n, err := RemoveStaleTemps(dir); n > 0 {
		env.Logf("removed %d temporary files of recordings that did not finish in %s", n, shown)
	} else if err != nil {
		env.Note(fmt.Errorf("looking for temporary files of unfinished recordings in %s: %v", shown, err))
	}
	// O_TMPFILE makes a new inode in dir with no name; mode 0600.
	if fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600); err == nil {
		f := os.NewFile(uintptr(fd), name)
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			p.Close()
			return nil, setupError("cannot lock the output's temporary file in %s: %v", shown, err)
		}
		o.f, o.W, o.dir = f, f, dir
		return o, nil
	}
	// CreateTemp opens with O_CREAT|O_EXCL and mode 0600: a new file that
	// only we can have made.
	f, err := os.CreateTemp(dir, tempPattern(name))
	if err != nil {
		p.Close()
		// The error names the directory by its descriptor's /proc path:
		// say the directory's own name and the reason.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if abs, aerr := filepath.Abs(shown); aerr == nil {
			shown = abs
		}
		return nil, setupError("cannot create the output in %s: %v (give -o a path in a directory you can write to)", shown, err)
	}
	// The lock lives as long as this process: a later run that can take
	// it knows the file is a dead run's (RemoveStaleTemps).
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(f.Name())
		p.Close()
		return nil, setupError("cannot lock the output's temporary file in %s: %v", shown, err)
	}
	o.f, o.W, o.tmp = f, f, f.Name()
	return o, nil
}

// trustedUIDs are the users whose links record follows and whose FIFOs
// and devices it writes into: root, this process's user and, under sudo,
// the user who ran it.
func trustedUIDs(sys System) []int {
	uids := []int{0}
	if euid := sys.Geteuid(); euid != 0 {
		return append(uids, euid)
	}
	if uid, err := strconv.Atoi(sys.Getenv("SUDO_UID")); err == nil && uid != 0 {
		uids = append(uids, uid)
	}
	return uids
}

// spool makes the unlinked temporary file a streamed output is written to
// first.
func (o *Output) spool() error {
	f, err := os.CreateTemp("", "faultline-record-*.data")
	if err != nil {
		if o.sink != nil {
			o.sink.Close()
		}
		return setupError("creating a spool file for %s: %v (set TMPDIR to a writable directory)", o.streamName(), err)
	}
	os.Remove(f.Name()) // unlinked: gone with the descriptor
	o.f, o.W = f, f
	return nil
}

func (o *Output) streamName() string {
	if o.Stdout {
		return "standard output"
	}
	return o.final
}

// openSpecial opens the device node or FIFO the output names (or the file
// /dev/stdout leads to) for writing, now, so that a refusal comes before the program runs: the
// inode ResolveOutput found, whatever its name points at by now.
func (o *Output) openSpecial() error {
	m := o.path.Mode
	o.Special = o.final
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
			return setupError("-o %s: FIFO not writable: %v", o.final, err)
		}
		return nil
	}
	if err != nil {
		return setupError("-o %s: cannot open the %s for writing: %v", o.final, specialKind(m), err)
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
		return setupError("-o %s exists and is read-only (mode %04o): remove it, make it writable (chmod u+w) or choose another -o", shown, fi.Mode().Perm())
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // the rename decides
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err == nil && flags&(fsImmutableFL|fsAppendFL) != 0 {
		return setupError("-o %s is immutable or append-only (lsattr shows i or a): it cannot be replaced; chattr -i -a it or choose another -o", shown)
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

// staleTemp matches the temporary names CreateOutput makes:
// "." + output name + "." + random digits + ".tmp".
var staleTemp = regexp.MustCompile(`^\..+\.[0-9]+\.tmp$`)

// RemoveStaleTemps removes the temporary files that runs of record killed
// before they finished (kill -9, a crash) left in dir. A file is a dead
// run's when its name is one CreateOutput makes, it is a regular file of
// this user holding a perf.data header, and its flock is free: a live run
// holds the lock until it exits. It returns how many it removed.
func RemoveStaleTemps(dir string) (int, error) {
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

// Commit finishes the output: hands the file to the sudo user, then renames
// it into place (or copies it out to the device or the FIFO; standard
// output has had everything already).
func (o *Output) Commit() error {
	if o.Stdout {
		o.done = true // streamed as it was written
		return nil
	}
	if o.tmp == "" && o.dir == "" {
		return o.copyOut()
	}
	if uid, err := GiveToInvoker(o.env.Sys, o.f); err != nil {
		o.env.Note(fmt.Errorf("could not give %s to the sudo user (uid %d): %v; read it with sudo", o.final, uid, err))
	}
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
func (o *Output) copyOut() error {
	defer o.Discard()
	if _, err := o.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var w io.Writer = o.env.Stdout
	if o.Special != "" {
		if o.sink == nil {
			o.env.Logf("waiting for a reader of the FIFO %s", o.Special)
			f, err := o.path.ReopenSpecial(0)
			if err != nil {
				return fmt.Errorf("opening the FIFO %s: %v", o.Special, err)
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

// Discard removes an unfinished output (error or interruption before the
// file was complete).
func (o *Output) Discard() {
	if o.done || o.Stdout {
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

// GiveToInvoker hands the recording to the user who ran sudo, through the
// descriptor we created. Written as root with mode 0600, it could otherwise
// not be read by 'faultline analyze' run without sudo (as the CI recipe
// does). It returns the sudo user's uid with a failure.
func GiveToInvoker(sys System, f *os.File) (int, error) {
	uid, err := strconv.Atoi(sys.Getenv("SUDO_UID"))
	if err != nil || uid == 0 || sys.Geteuid() != 0 {
		return 0, nil
	}
	gid, err := strconv.Atoi(sys.Getenv("SUDO_GID"))
	if err != nil {
		gid = -1 // leave the group
	}
	return uid, sys.Fchown(f, uid, gid)
}
