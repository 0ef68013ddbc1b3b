package perfdata

import (
	"encoding/binary"
	"fmt"
	"strings"
)

type byteOrder = binary.ByteOrder

// Attr is struct perf_event_attr up to PERF_ATTR_SIZE_VER8
// (include/uapi/linux/perf_event.h). Its fields are in the C struct's order
// and sizes, blank ones standing for the reserved fields, so that
// encoding/binary reads and writes it as perf lays it out: it holds only
// such fields.
type Attr struct {
	Type             EventType
	Size             uint32 // attr.size as recorded (0 means PERF_ATTR_SIZE_VER0)
	Config           uint64
	SamplePeriod     uint64 // or frequency when Flags has the freq bit
	SampleType       SampleFormat
	ReadFormat       ReadFormat
	Flags            AttrFlags // the bitfield word (disabled, inherit, ..., sample_id_all, ...)
	WakeupEvents     uint32
	BPType           uint32
	Config1          uint64 // bp_addr, kprobe_func, uprobe_path, config1
	Config2          uint64 // bp_len, kprobe_addr, probe_offset, config2
	BranchSampleType uint64
	SampleRegsUser   uint64
	SampleStackUser  uint32
	ClockID          int32
	SampleRegsIntr   uint64
	AuxWatermark     uint32
	SampleMaxStack   uint16
	_                uint16 // __reserved_2
	AuxSampleSize    uint32
	_                uint32 // __reserved_3
	SigData          uint64
	Config3          uint64
}

// SampleIDAll reports whether non-sample records carry a sample_id trailer.
func (a *Attr) SampleIDAll() bool { return a.Flags&AttrSampleIDAll != 0 }

// MmapData reports whether the event records non-executable mmaps too
// (perf record -d sets attr.mmap_data): only then can anonymous memory be
// told from unmapped memory.
func (a *Attr) MmapData() bool { return a.Flags&AttrMmapData != 0 }

// parseAttr reads a perf_event_attr from p as far as we know it; p may be
// shorter (older perf: the fields it lacks read as zero) or longer (newer
// perf: the rest is not read) than what we know.
func parseAttr(p []byte, bo byteOrder) Attr {
	var known [attrSizeVer8]byte
	copy(known[:], p)
	var a Attr
	if _, err := binary.Decode(known[:], bo, &a); err != nil {
		// Unreachable: known is exactly Attr's size (TestAttrLayout).
		panic("perfdata: Attr does not match perf_event_attr: " + err.Error())
	}
	return a
}

// attrLen returns how many bytes of p an attr occupies, from its size field.
func attrLen(p []byte, bo byteOrder) int {
	if len(p) < 8 {
		return len(p)
	}
	n := int(bo.Uint32(p[4:]))
	if n == 0 {
		n = attrSizeVer0
	}
	return n
}

// BuildID is one entry of the BUILD_ID feature (or an MMAP2 build id).
type BuildID struct {
	Pid      int32
	Misc     uint16 // cpumode bits: kernel, user, guest
	ID       []byte // 20 bytes for GNU build ids (trailing zero padding removed)
	Filename string
}

// String returns the build id in hex, as perf buildid-list prints it.
func (b BuildID) String() string { return fmt.Sprintf("%x", b.ID) }

// ClockData is the CLOCK_DATA feature: a reference point pairing the
// recording clock with wall-clock time.
type ClockData struct {
	Version uint32
	ClockID uint32
	TODNs   uint64 // wall-clock time of the reference point, ns since the epoch
	ClockNs uint64 // the recording clock at the same point
}

// Meta is what the header and its feature sections say about the recording.
// In pipe mode it fills in as HEADER_FEATURE records arrive.
type Meta struct {
	Layout
	Features        []Feature // feature bits present
	Hostname        string
	OSRelease       string
	Version         string // perf version
	Arch            string
	NrCPUsOnline    uint32
	NrCPUsAvail     uint32
	CPUDesc         string
	CPUID           string
	TotalMemKB      uint64
	Cmdline         []string
	BuildIDs        []BuildID
	ClockID         uint64                                                // CLOCKID feature: the clock's resolution in ns as perf stores it
	Compression     struct{ Version, Type, Level, Ratio, MmapLen uint32 } // COMPRESSED feature; Type 1 = zstd
	SampleTimeFirst uint64                                                // SAMPLE_TIME feature: first sample time (ns)
	SampleTimeLast  uint64                                                // SAMPLE_TIME feature: last sample time (ns)
	ClockData       ClockData                                             // CLOCK_DATA feature
	PMUMappings     map[string]uint32
	Tracing         *TracingData // parsed TRACING_DATA, nil when absent
}

// Layout is how the recording is laid out: its mode, byte order and the
// extent of its header and data.
type Layout struct {
	PipeMode   bool
	BigEndian  bool
	HeaderSize int64 // file header size (104 in file mode, 16 in pipe mode)
	DataOffset int64 // start of the data section
	DataSize   int64 // size of the data section as read (0 in pipe mode)
	FileSize   int64 // size of the input when known
	Truncated  bool  // the data ends early (see Reader.Warnings)
}

// HasFeature reports whether feature bit f is present.
func (m *Meta) HasFeature(f Feature) bool {
	for _, x := range m.Features {
		if x == f {
			return true
		}
	}
	return false
}

// stringFeature returns the Meta field filled by feature f when f's section
// is a single perf header string, and nil for every other feature.
func (m *Meta) stringFeature(f Feature) *string {
	return map[Feature]*string{
		FeatHostname: &m.Hostname, FeatOSRelease: &m.OSRelease, FeatVersion: &m.Version,
		FeatArch: &m.Arch, FeatCPUDesc: &m.CPUDesc, FeatCPUID: &m.CPUID,
	}[f]
}

// maxFeatureSize caps a feature section read from a stream (pipe mode) or
// held in memory; perf's largest (TRACING_DATA with kallsyms) stays far below.
const maxFeatureSize = 256 << 20

// parseFeature applies one feature section to the reader's metadata.
// Unknown and unneeded features are ignored. Errors are returned for the
// caller to record as warnings: a bad feature section does not stop decoding.
func (r *Reader) parseFeature(feat Feature, p []byte, base int64) error {
	b := makeBuf(p, base, r.bo, "feature "+feat.String())
	m := &r.meta
	if s := m.stringFeature(feat); s != nil {
		*s = b.headerString()
		return b.err
	}
	switch feat {
	case FeatTracingData:
		td, err := parseTracingData(p, base)
		if td != nil {
			m.Tracing = td
			r.attachFormats()
		}
		return err
	case FeatBuildID:
		for b.left() >= 8 && b.err == nil {
			start := b.off
			b.u32() // type
			misc := b.u16()
			size := int(b.u16())
			if size < 8+4+24 || start+size > len(b.b) {
				return &FormatError{Offset: b.base + int64(start), Msg: fmt.Sprintf("build id entry of %d bytes", size)}
			}
			eb := makeBuf(b.b[start+8:start+size], b.base+int64(start+8), r.bo, "build id")
			var bid BuildID
			parseBuildIDEvent(&bid, &eb, misc)
			m.BuildIDs = append(m.BuildIDs, bid)
			b.off = start + size
		}
	case FeatNrCPUs:
		m.NrCPUsAvail, m.NrCPUsOnline = b.u32(), b.u32()
	case FeatTotalMem:
		m.TotalMemKB = b.u64()
	case FeatCmdline:
		n := b.u32()
		m.Cmdline = m.Cmdline[:0]
		for i := uint32(0); i < n && b.err == nil; i++ {
			m.Cmdline = append(m.Cmdline, b.headerString())
		}
	case FeatEventDesc:
		r.parseEventDesc(&b)
	case FeatSampleTime:
		m.SampleTimeFirst, m.SampleTimeLast = b.u64(), b.u64()
	case FeatClockID:
		m.ClockID = b.u64()
	case FeatClockData:
		m.ClockData.Version = b.u32()
		m.ClockData.ClockID = b.u32()
		m.ClockData.TODNs = b.u64()
		m.ClockData.ClockNs = b.u64()
	case FeatCompressed:
		c := &m.Compression
		c.Version = b.u32()
		c.Type = b.u32()
		c.Level = b.u32()
		c.Ratio = b.u32()
		c.MmapLen = b.u32()
	case FeatPMUMappings:
		n := b.u32()
		m.PMUMappings = make(map[string]uint32)
		for i := uint32(0); i < n && b.err == nil; i++ {
			t := b.u32()
			name := b.headerString()
			if b.err == nil {
				m.PMUMappings[name] = t
			}
		}
	}
	return b.err
}

// parseEventDesc reads EVENT_DESC: u32 nr, u32 attr_size, then per event the
// attr, u32 nr_ids, a header string name and u64 ids[nr_ids]. It names the
// events (matching by id, else by position).
func (r *Reader) parseEventDesc(b *buf) {
	nr := b.u32()
	asz := b.u32()
	if b.err != nil {
		return
	}
	if asz < attrSizeVer0 || int(asz) > b.left() {
		b.err = &FormatError{Offset: b.pos() - 4, Msg: fmt.Sprintf("EVENT_DESC attr size %d", asz)}
		return
	}
	for i := uint32(0); i < nr && b.err == nil; i++ {
		b.skip(uint64(asz))
		nids := b.u32()
		name := b.headerString()
		if uint64(nids) > uint64(b.left())/8 {
			b.fail(int(nids) * 8)
			return
		}
		var ev *Event
		for k := uint32(0); k < nids; k++ {
			id := b.u64()
			if ev == nil {
				ev = r.ids.byID[id]
			}
		}
		if ev == nil && int(i) < len(r.events) {
			ev = r.events[i]
		}
		if ev != nil && name != "" {
			ev.Name = name
			ev.named = true
		}
	}
}

// attachFormats links tracepoint events to their ftrace formats and names
// unnamed ones after them.
func (r *Reader) attachFormats() {
	td := r.meta.Tracing
	if td == nil {
		return
	}
	for _, ev := range r.events {
		if ev.Attr.Type != TypeTracepoint || ev.Format != nil {
			continue
		}
		for _, f := range td.Formats {
			if f.ID == ev.Attr.Config {
				ev.Format = f
				if !ev.named {
					ev.Name = f.System + ":" + f.Name
				}
				break
			}
		}
	}
}

var hwNames = [...]string{"cycles", "instructions", "cache-references", "cache-misses",
	"branches", "branch-misses", "bus-cycles", "stalled-cycles-frontend",
	"stalled-cycles-backend", "ref-cycles"}

// synthName makes up a name the way perf's evsel__name would for events the
// file does not name.
func synthName(a *Attr) string {
	var name string
	switch a.Type {
	case TypeHardware:
		if a.Config < uint64(len(hwNames)) {
			name = hwNames[a.Config]
		}
	case TypeSoftware:
		if a.Config < uint64(len(swNames)) {
			name = swNames[a.Config]
		}
	case TypeTracepoint:
		name = fmt.Sprintf("tracepoint:%d", a.Config)
	case TypeBreakpoint:
		name = fmt.Sprintf("mem:0x%x", a.Config1)
	}
	if name == "" {
		name = fmt.Sprintf("type%d/config=0x%x/", a.Type, a.Config)
	}
	var mod strings.Builder
	eu, ek, eh := a.Flags&AttrExcludeUser != 0, a.Flags&AttrExcludeKernel != 0, a.Flags&AttrExcludeHV != 0
	if eu || ek || eh {
		if !eu {
			mod.WriteByte('u')
		}
		if !ek {
			mod.WriteByte('k')
		}
		if !eh {
			mod.WriteByte('h')
		}
	}
	if mod.Len() > 0 && a.Type != TypeTracepoint {
		name += ":" + mod.String()
	}
	return name
}
