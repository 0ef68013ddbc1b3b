package perfdata

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Tracing data (the TRACING_DATA feature, or the data following a pipe-mode
// HEADER_TRACING_DATA record) is what tools/perf/util/trace-event-info.c
// writes and trace-event-read.c reads:
//
//	"\x17\x08\x44tracing" version\0 u8 bigendian, u8 long_size, u32 page_size
//	"header_page\0" u64 size, data
//	"header_event\0" u64 size, data
//	u32 count, { u64 size, ftrace format text }[count]
//	u32 systems, { system\0, u32 count, { u64 size, format text }[count] }[systems]
//	u32 size, kallsyms      (usually 0 now)
//	u32 size, ftrace_printk
//	u64 size, saved_cmdlines (version >= 0.6)
//
// Integers are in the byte order given by the bigendian byte. Each format
// text is what /sys/kernel/tracing/events/SYSTEM/NAME/format shows.

// TraceFormat is an ftrace event's format description (from TRACING_DATA).
type TraceFormat struct {
	System, Name string
	ID           uint64
	Fields       []TraceField
}

// TraceField is one field of a TraceFormat.
type TraceField struct {
	Name      string
	Offset    int
	Size      int
	Signed    bool
	Type      string // C type as written in the format, e.g. "unsigned long", "char[16]"
	ArrayLen  int    // element count for fixed arrays (0 for scalars)
	Dynamic   bool   // __data_loc / __rel_loc: the field holds offset and length of the data
	Common    bool   // common_* header field
	bigEndian bool
}

// Field returns the named field, or nil. Resolve once per Event, not per sample.
func (f *TraceFormat) Field(name string) *TraceField {
	if f == nil {
		return nil
	}
	for i := range f.Fields {
		if f.Fields[i].Name == name {
			return &f.Fields[i]
		}
	}
	return nil
}

// Uint64 reads the field from a sample's raw data (zero-extended or
// sign-extended per Signed); ok is false when raw is too short or the field
// is not 1, 2, 4 or 8 bytes wide.
func (tf *TraceField) Uint64(raw []byte) (v uint64, ok bool) {
	if tf == nil || tf.Offset < 0 || tf.Offset+tf.Size > len(raw) {
		return 0, false
	}
	p := raw[tf.Offset:]
	var bo binary.ByteOrder = binary.LittleEndian
	if tf.bigEndian {
		bo = binary.BigEndian
	}
	switch tf.Size {
	case 1:
		v = uint64(p[0])
		if tf.Signed {
			v = uint64(int64(int8(p[0])))
		}
	case 2:
		x := bo.Uint16(p)
		v = uint64(x)
		if tf.Signed {
			v = uint64(int64(int16(x)))
		}
	case 4:
		x := bo.Uint32(p)
		v = uint64(x)
		if tf.Signed {
			v = uint64(int64(int32(x)))
		}
	case 8:
		v = bo.Uint64(p)
	default:
		return 0, false
	}
	return v, true
}

// Bytes returns the field's bytes in raw (for arrays and strings); for a
// dynamic (__data_loc) field it follows the offset/length it holds.
func (tf *TraceField) Bytes(raw []byte) ([]byte, bool) {
	if tf == nil || tf.Offset < 0 || tf.Offset+tf.Size > len(raw) {
		return nil, false
	}
	if !tf.Dynamic {
		return raw[tf.Offset : tf.Offset+tf.Size], true
	}
	v, ok := tf.Uint64(raw)
	if !ok {
		return nil, false
	}
	off, n := int(v&0xffff), int(v>>16&0xffff)
	if strings.HasPrefix(tf.Type, "__rel_loc") {
		off += tf.Offset + tf.Size
	}
	if off+n > len(raw) {
		return nil, false
	}
	return raw[off : off+n], true
}

// TracingData is the parsed tracing data of a recording.
type TracingData struct {
	Version   string
	BigEndian bool
	LongSize  int
	PageSize  int
	Formats   []*TraceFormat
}

// maxTraceFormats bounds the number of formats so a corrupt count cannot
// make the parser loop for long.
const maxTraceFormats = 1 << 16

// parseTracingData parses tracing data; base is its file offset for errors.
func parseTracingData(p []byte, base int64) (*TracingData, error) {
	fail := func(off int, format string, args ...any) error {
		return &FormatError{Offset: base + int64(off), Msg: "tracing data: " + fmt.Sprintf(format, args...)}
	}
	if len(p) < 10 || string(p[:3]) != "\x17\x08\x44" || string(p[3:10]) != "tracing" {
		return nil, fail(0, "bad magic (want \"\\x17\\x08Dtracing\")")
	}
	td := &TracingData{}
	off := 10
	i := bytes.IndexByte(p[off:], 0)
	if i < 0 || i > 64 {
		return nil, fail(off, "bad version string")
	}
	td.Version = string(p[off : off+i])
	off += i + 1
	if len(p) < off+6 {
		return nil, fail(off, "truncated")
	}
	td.BigEndian = p[off] != 0
	td.LongSize = int(p[off+1])
	var bo binary.ByteOrder = binary.LittleEndian
	if td.BigEndian {
		bo = binary.BigEndian
	}
	b := makeBuf(p, base, bo, "tracing data")
	b.off = off + 2
	td.PageSize = int(b.u32())
	for _, name := range []string{"header_page", "header_event"} {
		tag := b.bytes(uint64(len(name) + 1))
		if b.err == nil && string(tag) != name+"\x00" {
			return nil, fail(b.off-len(tag), "missing %q", name)
		}
		n := b.u64()
		b.skip(n)
	}
	if b.err != nil {
		return nil, b.err
	}
	n := b.u32()
	for i := uint32(0); i < n && b.err == nil; i++ {
		sz := b.u64()
		b.skip(sz) // ftrace's own events (function, ...): not needed
	}
	systems := b.u32()
	for s := uint32(0); s < systems && b.err == nil; s++ {
		rest := b.b[b.off:]
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			return nil, fail(b.off, "unterminated system name")
		}
		sys := string(rest[:j])
		b.off += j + 1
		count := b.u32()
		for x := uint32(0); x < count && b.err == nil; x++ {
			sz := b.u64()
			at := b.pos()
			text := b.bytes(sz)
			if b.err != nil {
				break
			}
			if len(td.Formats) >= maxTraceFormats {
				return nil, fail(int(at-base), "more than %d event formats", maxTraceFormats)
			}
			f, err := ParseTraceFormat(sys, text)
			if err != nil {
				return nil, &FormatError{Offset: at, Msg: "tracing data: event format", Err: err}
			}
			for k := range f.Fields {
				f.Fields[k].bigEndian = td.BigEndian
			}
			td.Formats = append(td.Formats, f)
		}
	}
	// kallsyms, printk formats and saved cmdlines follow; nothing here needs
	// them, and a short tail is not worth failing over once formats parsed.
	if b.err != nil {
		return td, b.err
	}
	return td, nil
}

// ParseTraceFormat parses one ftrace event format text
// (/sys/kernel/tracing/events/SYSTEM/NAME/format) for the given system.
func ParseTraceFormat(system string, text []byte) (*TraceFormat, error) {
	f := &TraceFormat{System: system}
	for _, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "name:"):
			f.Name = strings.TrimSpace(line[len("name:"):])
		case strings.HasPrefix(line, "ID:"):
			id, err := strconv.ParseUint(strings.TrimSpace(line[len("ID:"):]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad ID line %q", line)
			}
			f.ID = id
		case strings.HasPrefix(line, "field:"):
			fld, err := parseTraceField(line)
			if err != nil {
				return nil, err
			}
			f.Fields = append(f.Fields, fld)
		}
	}
	if f.Name == "" {
		return nil, fmt.Errorf("format has no name line")
	}
	return f, nil
}

// parseTraceField parses
//
//	field:unsigned long __probe_ip;	offset:8;	size:8;	signed:0;
func parseTraceField(line string) (TraceField, error) {
	var fld TraceField
	for _, part := range strings.Split(line, ";") {
		part = strings.TrimSpace(part)
		k, v, ok := strings.Cut(part, ":")
		if !ok {
			continue
		}
		switch k {
		case "field":
			decl := strings.TrimSpace(v)
			// The name is the last identifier, before any [N]; a
			// dynamic array's declaration puts it after the brackets
			// ("__data_loc char[] name").
			name := decl
			if i := strings.IndexByte(name, ']'); i >= 0 && strings.TrimSpace(name[i+1:]) != "" {
				name = strings.TrimSpace(name[i+1:])
			} else if i := strings.IndexByte(name, '['); i >= 0 {
				n := strings.TrimSuffix(name[i+1:], "]")
				if c, err := strconv.Atoi(strings.TrimSpace(n)); err == nil {
					fld.ArrayLen = c
				}
				name = strings.TrimSpace(name[:i])
			}
			j := strings.LastIndexAny(name, " \t*")
			fld.Name = name[j+1:]
			fld.Type = strings.TrimSpace(strings.Replace(decl, fld.Name, "", 1))
			if fld.Type == "" {
				fld.Type = decl
			}
			fld.Dynamic = strings.HasPrefix(decl, "__data_loc") || strings.HasPrefix(decl, "__rel_loc")
			fld.Common = strings.HasPrefix(fld.Name, "common_")
		case "offset":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return fld, fmt.Errorf("bad field offset in %q", line)
			}
			fld.Offset = n
		case "size":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return fld, fmt.Errorf("bad field size in %q", line)
			}
			fld.Size = n
		case "signed":
			fld.Signed = strings.TrimSpace(v) == "1"
		}
	}
	if fld.Name == "" {
		return fld, fmt.Errorf("field without a name: %q", line)
	}
	return fld, nil
}
