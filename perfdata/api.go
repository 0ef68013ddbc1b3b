package perfdata

// API CONTRACT (written first so the symbolize and attribute work can start
// against it). The perfdata implementer may add fields and methods, move these
// declarations into records.go/reader.go, and replace the unimplemented bodies,
// but must not rename or remove what is declared here without telling the team.

import "io"

// RecordType is perf_event_header.type (include/uapi/linux/perf_event.h and
// tools/perf/util/event.h for the user types >= 64).
type RecordType uint32

// Record is one decoded record. Every concrete record type embeds
// RecordCommon. The record and every slice it holds are valid only until the
// next call to Reader.Next: copy what you keep.
type Record interface {
	Common() *RecordCommon
}

// SampleID holds the sample_id_all trailer of non-sample records (or the same
// fields of a sample). Fields the attr did not ask for are zero; Has tells
// which are present (bits of PERF_SAMPLE_*).
type SampleID struct {
	Pid, Tid uint32
	Time     uint64
	ID       uint64
	StreamID uint64
	CPU      uint32
	Has      uint64 // PERF_SAMPLE_* bits actually present
}

// RecordCommon is embedded in every record.
type RecordCommon struct {
	Type   RecordType
	Misc   uint16
	Offset int64 // file offset of the record header (for compressed records: offset of the COMPRESSED record holding it)
	SampleID
}

// Common returns the embedded RecordCommon.
func (c *RecordCommon) Common() *RecordCommon { return c }

// Event is one perf_event_attr in the recording together with what we know
// about it: its name as perf prints it, its sample ids and, for tracepoints
// and probes, the ftrace format of its raw data.
type Event struct {
	Index  int    // position in the attr table
	Name   string // e.g. "probe_libc:malloc", "page-faults:u", "exceptions:page_fault_user"
	Attr   Attr
	IDs    []uint64
	Format *TraceFormat // nil unless a tracepoint/probe with TRACING_DATA
}

// Attr is the subset of perf_event_attr the decoder and its users need.
type Attr struct {
	Type            uint32
	Size            uint32
	Config          uint64
	SamplePeriod    uint64 // or frequency when Flags has the freq bit
	SampleType      uint64 // PERF_SAMPLE_* bits
	ReadFormat      uint64
	Flags           uint64 // the bitfield word (disabled, inherit, ..., sample_id_all, ...)
	SampleRegsUser  uint64
	SampleStackUser uint32
	SampleRegsIntr  uint64
	// the implementer adds whatever else is useful (wakeup, bp, config1/2, clockid, ...)
}

// TraceFormat is an ftrace event's format description (from TRACING_DATA).
type TraceFormat struct {
	System, Name string
	ID           uint64
	Fields       []TraceField
}

// TraceField is one field of a TraceFormat.
type TraceField struct {
	Name   string
	Offset int
	Size   int
	Signed bool
	// implementer may add Type string, array info, ...
}

// Field returns the named field, or nil. Resolve once per Event, not per sample.
func (f *TraceFormat) Field(name string) *TraceField { panic("unimplemented") }

// Uint64 reads the field from a sample's raw data (zero-extended or
// sign-extended per Signed); ok is false when raw is too short.
func (tf *TraceField) Uint64(raw []byte) (v uint64, ok bool) { panic("unimplemented") }

// Sample is PERF_RECORD_SAMPLE.
type Sample struct {
	RecordCommon
	Event     *Event // resolved from the sample id (or the only attr)
	IP        uint64
	Addr      uint64
	Period    uint64
	Callchain []uint64 // raw, including PERF_CONTEXT_* markers
	Raw       []byte   // PERF_SAMPLE_RAW payload (tracepoint data)
	RegsABI   uint64   // PERF_SAMPLE_REGS_ABI_*; 0 = none
	RegsMask  uint64   // the attr's sample_regs_user
	Regs      []uint64 // user regs in mask bit order (lowest bit first)
	Stack     []byte   // PERF_SAMPLE_STACK_USER copy, truncated to dyn_size; points into the reader's buffer
	// the implementer adds the other sample_type fields (READ, BRANCH_STACK, WEIGHT, DATA_SRC, ...)
}

// Mmap is PERF_RECORD_MMAP or PERF_RECORD_MMAP2 (Type tells which).
type Mmap struct {
	RecordCommon
	Pid, Tid           uint32
	Addr, Len, Pgoff   uint64
	Maj, Min           uint32
	Ino, InoGeneration uint64
	Prot, Flags        uint32
	BuildID            []byte // MMAP2 with PERF_RECORD_MISC_MMAP_BUILD_ID
	Filename           string
}

// Comm is PERF_RECORD_COMM; Exec is set when misc has PERF_RECORD_MISC_COMM_EXEC.
type Comm struct {
	RecordCommon
	Pid, Tid uint32
	Comm     string
	Exec     bool
}

// Fork is PERF_RECORD_FORK; Exit is PERF_RECORD_EXIT (same layout).
type Fork struct {
	RecordCommon
	Pid, Ppid, Tid, Ptid uint32
	Time                 uint64
}

// Lost is PERF_RECORD_LOST; LostSamples is PERF_RECORD_LOST_SAMPLES. Both
// name the event whose samples were lost when the id resolves.
type Lost struct {
	RecordCommon
	Event *Event
	ID    uint64
	Count uint64
}

// Raw is any record the decoder does not parse: its bytes after the header.
type Raw struct {
	RecordCommon
	Data []byte
}

// Order selects how records are delivered.
type Order int

const (
	TimeOrder Order = iota // default: sorted by time using FINISHED_ROUND, as perf does
	FileOrder
)

// Options configures a Reader.
type Options struct {
	Order Order
}

// Reader decodes a perf.data file (file or pipe mode).
//
//	r, err := perfdata.Open(path, nil)
//	for r.Next() { switch rec := r.Record().(type) { case *perfdata.Sample: ... } }
//	if err := r.Err(); err != nil { ... }
//	for _, w := range r.Warnings() { ... }
type Reader struct{}

// Open opens path ("-" is not special here) and detects file or pipe mode.
func Open(path string, opts *Options) (*Reader, error) { panic("unimplemented") }

// New decodes a file-mode (or pipe-mode) recording held in r of the given size.
func New(r io.ReaderAt, size int64, opts *Options) (*Reader, error) { panic("unimplemented") }

// NewStream decodes a pipe-mode recording from a stream such as stdin.
func NewStream(r io.Reader, opts *Options) (*Reader, error) { panic("unimplemented") }

// Events returns the recording's events (in pipe mode, those seen so far).
func (r *Reader) Events() []*Event { panic("unimplemented") }

// Next advances to the next record; false at the end or on error.
func (r *Reader) Next() bool { panic("unimplemented") }

// Record returns the current record, valid until the next call to Next.
func (r *Reader) Record() Record { panic("unimplemented") }

// Err returns the first error that stopped decoding (a *FormatError for bad input).
func (r *Reader) Err() error { panic("unimplemented") }

// Warnings returns non-fatal problems (truncation, skipped data, ...), each with an offset.
func (r *Reader) Warnings() []error { panic("unimplemented") }

// Close releases what Open opened.
func (r *Reader) Close() error { panic("unimplemented") }

// FormatError reports bad input at a file offset.
type FormatError struct {
	Offset int64
	Msg    string
	Err    error
}

func (e *FormatError) Error() string { panic("unimplemented") }
func (e *FormatError) Unwrap() error { return e.Err }

// BuildID is one entry of the BUILD_ID feature (or an MMAP2 build id).
type BuildID struct {
	Pid      int32
	Misc     uint16 // cpumode bits: kernel, user, guest
	ID       []byte // 20 bytes for GNU build ids (trailing zero padding removed)
	Filename string
}

// Meta is what the header and its feature sections say about the recording.
// In pipe mode it fills in as HEADER_FEATURE records arrive.
type Meta struct {
	PipeMode     bool
	BigEndian    bool
	Features     []int // feature bits present (HEADER_* numbers)
	Hostname     string
	OSRelease    string
	Version      string // perf version
	Arch         string
	NrCPUsOnline uint32
	NrCPUsAvail  uint32
	CPUDesc      string
	CPUID        string
	TotalMemKB   uint64
	Cmdline      []string
	BuildIDs     []BuildID
	ClockID      uint64
	Compression  struct{ Version, Type, Level, Ratio, MmapLen uint32 }
	// the implementer adds the rest (sample time range, clock data, ...)
}

// Meta returns the header and feature information decoded so far.
func (r *Reader) Meta() *Meta { panic("unimplemented") }
