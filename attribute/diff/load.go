// Package diff compares two faultline profiles allocation site by allocation
// site, decides whether NEW regressed against BASE, renders the comparison as
// text, Markdown or JSON, and builds a pprof diff profile like
// `go tool pprof -diff_base`.
//
// Sites are keyed by symbolized frames (function, source file base name,
// line), never by addresses, so two builds of a program or two ASLR layouts
// compare site for site. Unattributed faults form one site per class
// ("[stack]", "[file] libc.so.6", ...).
package diff

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/faultline/faultline/perfdata"
	"github.com/google/pprof/profile"
)

// IsPerfData reports whether the file at path is a perf.data recording
// rather than a profile, judging by its magic.
func IsPerfData(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var magic [perfdata.MagicLen]byte
	n, err := io.ReadFull(f, magic[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return perfdata.IsPerfData(magic[:n]), nil
}

// NotProfileError reports an input that is neither a pprof profile nor a
// perf.data recording.
type NotProfileError struct {
	Path string
	Err  error
}

func (e *NotProfileError) Error() string {
	return fmt.Sprintf("%s: not a faultline profile (gzipped pprof) or perf.data recording: %v", e.Path, e.Err)
}

func (e *NotProfileError) Unwrap() error { return e.Err }

// Load reads a pprof profile (gzipped or not) from path. A file that is not
// a profile yields a *NotProfileError naming it.
func Load(path string) (*profile.Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if perfdata.IsPerfData(data) {
		return nil, &NotProfileError{Path: path, Err: errors.New("this is a perf.data recording; analyze it first")}
	}
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		// Decompress here, bounded: profile.ParseData would inflate a
		// gzip bomb (1000× per member) without limit.
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, &NotProfileError{Path: path, Err: err}
		}
		raw, err := io.ReadAll(io.LimitReader(zr, maxProfileSize+1))
		if err != nil {
			return nil, &NotProfileError{Path: path, Err: fmt.Errorf("decompressing: %w", err)}
		}
		if len(raw) > maxProfileSize {
			return nil, &NotProfileError{Path: path, Err: fmt.Errorf("decompresses to more than %d MiB, more than any faultline profile holds", maxProfileSize>>20)}
		}
		data = raw
	}
	p, err := profile.ParseData(data)
	if err != nil {
		return nil, &NotProfileError{Path: path, Err: err}
	}
	return p, nil
}

// maxProfileSize caps a profile's decompressed size. faultline's profiles
// aggregate by site and stay in the megabytes.
const maxProfileSize = 256 << 20
