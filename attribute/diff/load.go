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
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/faultline/faultline/perfdata"
	"github.com/google/pprof/profile"
)

// isPerfData reports whether the file at path is a perf.data recording
// rather than a profile, judging by its magic. It opens path: for a pipe,
// use Sniff on the one open file instead.
func isPerfData(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, perf, err := Sniff(f)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return perf, nil
}

// Sniff reports whether r starts with a perf.data magic without losing
// those bytes: read the input through the returned reader. Use it instead
// of isPerfData for inputs that cannot be opened twice, such as a pipe
// (diff <(cat p.pb.gz) ...).
func Sniff(r io.Reader) (io.Reader, bool, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(perfdata.MagicLen)
	if err != nil && !errors.Is(err, io.EOF) {
		return br, false, err
	}
	return br, perfdata.IsPerfData(magic), nil
}

// notProfileError reports an input that is neither a pprof profile nor a
// perf.data recording.
type notProfileError struct {
	Path string
	Err  error
}

func (e *notProfileError) Error() string {
	return fmt.Sprintf("%s: not a faultline profile (gzipped pprof) or perf.data recording: %v", e.Path, e.Err)
}

func (e *notProfileError) Unwrap() error { return e.Err }

// load reads a pprof profile (gzipped or not) from path. A file that is not
// a profile yields a *notProfileError naming it.
func load(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(path, f)
}

// Read reads a pprof profile from r, named name in errors. Everything is
// bounded: at most maxInputSize bytes are read from r, every gzip layer
// (profiles gzipped twice included: pprof's parser would inflate an inner
// layer itself, without limit) inflates to at most maxProfileSize, and the
// parser gets only plain protobuf of at most that size.
func Read(name string, r io.Reader) (*profile.Profile, error) {
	data, err := readBounded(r, maxInputSize)
	if err != nil {
		return nil, err
	}
	if data == nil {
		return nil, &notProfileError{Path: name, Err: fmt.Errorf("more than %d MiB, larger than any faultline profile; is it a device or a stream that never ends?", maxInputSize>>20)}
	}
	if perfdata.IsPerfData(data) {
		return nil, &notProfileError{Path: name, Err: errors.New("this is a perf.data recording; analyze it first")}
	}
	for layer := 1; len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b; layer++ {
		if layer > maxGzipLayers {
			return nil, &notProfileError{Path: name, Err: fmt.Errorf("gzip inside gzip more than %d times: not a profile pprof or faultline writes", maxGzipLayers)}
		}
		if data, err = gunzip(data); err != nil {
			return nil, &notProfileError{Path: name, Err: fmt.Errorf("gzip layer %d: %w", layer, err)}
		}
	}
	cost, err := loadCost(data)
	if err != nil {
		return nil, &notProfileError{Path: name, Err: fmt.Errorf("not a pprof protobuf: %w", err)}
	}
	if cost > maxLoadCost {
		return nil, &notProfileError{Path: name, Err: fmt.Errorf("loading it would take about %d MiB, more than the %d MiB a faultline profile needs", cost>>20, maxLoadCost>>20)}
	}
	// ParseUncompressed, not ParseData: no second gunzip and no legacy
	// text formats, which faultline never writes.
	p, err := profile.ParseUncompressed(data)
	if err == nil {
		err = p.CheckValid()
	}
	if err != nil {
		return nil, &notProfileError{Path: name, Err: err}
	}
	return p, nil
}

// readBounded reads r to its end in chunks and returns the bytes in one
// slice of exactly their size, or nil (and no error) once there are more
// than max: an endless input costs at most max bytes of chunks, never the
// doubling growth of io.ReadAll.
func readBounded(r io.Reader, max int) ([]byte, error) {
	const chunk = 1 << 20
	var chunks [][]byte
	total := 0
	for {
		b := make([]byte, chunk)
		n, err := io.ReadFull(r, b)
		total += n
		if total > max {
			return nil, nil
		}
		chunks = append(chunks, b[:n])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	data := make([]byte, 0, total)
	for _, c := range chunks {
		data = append(data, c...)
	}
	return data, nil
}

// maxGzipLayers is how deep gzip may nest: pprof writes one layer, and a
// profile gzipped once more by hand or by a web server still loads.
const maxGzipLayers = 2

// gunzip inflates one gzip layer (all its members) to at most
// maxProfileSize bytes. It inflates twice: once to measure, without
// keeping the bytes, then into a buffer of exactly that size. A bomb is
// refused having cost CPU only, and a good layer costs its own size, not
// the doubling growth of io.ReadAll (up to twice the cap, several times
// over under the race detector).
func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(io.Discard, io.LimitReader(zr, maxProfileSize+1))
	if err != nil {
		return nil, fmt.Errorf("decompressing: %w", err)
	}
	if n > maxProfileSize {
		return nil, fmt.Errorf("decompresses to more than %d MiB, more than any faultline profile holds", maxProfileSize>>20)
	}
	if err := zr.Reset(bytes.NewReader(data)); err != nil {
		return nil, err
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(zr, raw); err != nil {
		return nil, fmt.Errorf("decompressing: %w", err)
	}
	return raw, nil
}

// maxInputSize caps the bytes read from an input, maxProfileSize what
// every gzip layer inflates to. faultline's profiles aggregate by site and
// stay in the megabytes (gzipped, as analyze writes them, far less).
const (
	maxInputSize   = 64 << 20
	maxProfileSize = 128 << 20
)
