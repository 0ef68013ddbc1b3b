package correlate

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
)

// Access is one line of an access log.
type Access struct {
	Time  int64 // nanoseconds in the access log's clock; 0 when the log has no times
	IP    uint64
	Addr  uint64
	Line  int64  // 1-based line number in the access log
	Tid   uint32 // 0 when the log has no thread ids
	Write bool
	// 40 bytes: the matcher keeps seven per fault (maxFaults).
}

// AccessLayout says which optional columns an access log has. The first
// access line decides; every other line must agree.
type AccessLayout struct {
	Time bool // a leading SECONDS.FRACTION: column
	Tid  bool // a thread id column (decimal)
}

func (l AccessLayout) String() string {
	switch {
	case l.Time && l.Tid:
		return "time and thread id"
	case l.Time:
		return "time"
	case l.Tid:
		return "thread id"
	}
	return "ip and address only (pinatrace)"
}

// FormatError reports access or fault log input that cannot be parsed.
type FormatError struct {
	Input  string // "access log", "fault log"
	Line   int64
	Offset int64 // byte offset of the line
	Msg    string
	Err    error // the kind of error, when it is one of this package's (ErrTooManyFaults, ...); Msg says it
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s line %d (offset %#x): %s", e.Input, e.Line, e.Offset, e.Msg)
}

// Unwrap returns the kind of error.
func (e *FormatError) Unwrap() error { return e.Err }

// maxLine bounds one access log line: pinatrace lines are ~40 bytes; a
// longer line is not an access log.
const maxLine = 4096

// accessReader streams an access log. The Access returned by Access is
// reused by the next call to Next.
type accessReader struct {
	br      *bufio.Reader
	line    int64
	off     int64
	cur     Access
	layout  AccessLayout
	decided bool
	err     error
	// Truncated is set when the last line had no newline and did not
	// parse (a log cut short while being written); it is skipped.
	Truncated bool
	// Bytes counts the bytes read so far (for progress).
	Bytes int64
}

// newAccessReader starts reading an access log.
func newAccessReader(r io.Reader) *accessReader {
	return &accessReader{br: bufio.NewReaderSize(r, 1<<20)}
}

// Layout returns the log's columns, known after the first access.
func (r *accessReader) Layout() AccessLayout { return r.layout }

// Access returns the current access.
func (r *accessReader) Access() *Access { return &r.cur }

// Err returns the first error, nil at a clean end of input.
func (r *accessReader) Err() error { return r.err }

// Next advances to the next access; false at the end of input or on error.
func (r *accessReader) Next() bool {
	for r.err == nil {
		b, err := r.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			r.err = &FormatError{"access log", r.line + 1, r.off, fmt.Sprintf("line longer than %d bytes: not a pinatrace access log", r.br.Size()), nil}
			return false
		}
		if len(b) == 0 {
			if err != nil && err != io.EOF {
				r.err = fmt.Errorf("access log: %w", err)
			}
			return false
		}
		r.line++
		off := r.off
		r.off += int64(len(b))
		r.Bytes = r.off
		last := err != nil // no newline: the last line
		b = bytes.TrimRight(b, "\r\n")
		if len(b) > maxLine {
			r.err = &FormatError{"access log", r.line, off, fmt.Sprintf("line longer than %d bytes: not a pinatrace access log", maxLine), nil}
			return false
		}
		t := trimSpace(b)
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		if msg := r.parse(t); msg != "" {
			if last {
				r.Truncated = true
				return false
			}
			r.err = &FormatError{"access log", r.line, off, fmt.Sprintf("%s in %q; want [SECONDS.FRACTION:] [TID:] 0xIP: R|W 0xADDR", msg, b), nil}
			return false
		}
		r.cur.Line = r.line
		return true
	}
	return false
}

// parse reads one access line into r.cur; it returns a message on failure.
// It allocates nothing.
func (r *accessReader) parse(b []byte) string {
	var hasTime, hasTid bool
	var a Access
	// Leading columns: a time (has a '.') and a thread id, each optionally
	// followed by ':'; then the ip, which ends with ':'.
	for n := 0; ; n++ {
		tok, rest := nextField(b)
		if len(tok) == 0 {
			return "no ip"
		}
		if len(tok) > 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'X') {
			ip, ok := parseHex(bytes.TrimSuffix(tok, []byte(":")))
			if !ok {
				return "bad ip"
			}
			a.IP = ip
			b = rest
			break
		}
		if n >= 2 {
			return "too many columns before the ip"
		}
		tok = bytes.TrimSuffix(tok, []byte(":"))
		if bytes.IndexByte(tok, '.') >= 0 {
			t, ok := parseSeconds(tok)
			if !ok || hasTime {
				return "bad time"
			}
			a.Time, hasTime = t, true
		} else {
			tid, ok := parseDec(tok)
			if !ok || hasTid || tid > 1<<32-1 {
				return "bad thread id"
			}
			a.Tid, hasTid = uint32(tid), true
		}
		b = rest
	}
	tok, rest := nextField(b)
	switch {
	case len(tok) == 1 && (tok[0] == 'R' || tok[0] == 'r'):
	case len(tok) == 1 && (tok[0] == 'W' || tok[0] == 'w'):
		a.Write = true
	default:
		return "access type is not R or W"
	}
	tok, _ = nextField(rest)
	addr, ok := parseHex(tok)
	if !ok {
		return "bad address"
	}
	a.Addr = addr
	// Further columns (size, value) are ignored.
	if !r.decided {
		r.layout = AccessLayout{Time: hasTime, Tid: hasTid}
		r.decided = true
	} else if hasTime != r.layout.Time || hasTid != r.layout.Tid {
		return fmt.Sprintf("columns differ from the first access line's (%s)", r.layout)
	}
	r.cur = a
	return ""
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// nextField returns the first space-separated field of b and what follows.
func nextField(b []byte) (tok, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	return b[i:j], b[j:]
}

// parseHex parses hexadecimal with an optional 0x prefix, at most 16 digits.
func parseHex(b []byte) (uint64, bool) {
	if len(b) > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		b = b[2:]
	}
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | uint64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// parseDec parses a decimal number of at most 19 digits.
func parseDec(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// parseSeconds parses SECONDS.FRACTION into nanoseconds, exactly (digits
// past the ninth are dropped).
func parseSeconds(b []byte) (int64, bool) {
	dot := bytes.IndexByte(b, '.')
	if dot <= 0 || dot > 10 {
		return 0, false
	}
	sec, ok := parseDec(b[:dot])
	if !ok {
		return 0, false
	}
	frac := b[dot+1:]
	if len(frac) == 0 {
		return 0, false
	}
	var ns int64
	for i := 0; i < 9; i++ {
		ns *= 10
		if i < len(frac) {
			c := frac[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			ns += int64(c - '0')
		}
	}
	for _, c := range frac[min(len(frac), 9):] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	if sec > uint64(math.MaxInt64-ns)/1e9 {
		return 0, false // past 2^63 ns: would wrap negative
	}
	return int64(sec)*1e9 + ns, true
}
