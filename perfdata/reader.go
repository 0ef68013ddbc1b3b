package perfdata

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"math/bits"
	"os"
	"slices"
	"sort"
	"unsafe"
)

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

	// Counts of what the reader has delivered so far (final after Next
	// returns false).
	Samples uint64 // SAMPLE records
	// Lost sums the LOST_SAMPLES records of this event: samples the kernel
	// dropped because the ring buffer was full (perf report --stats prints
	// it per event as "LOST_SAMPLES events").
	Lost uint64
	// LostBuffer sums the LOST records whose id is this event's. A LOST
	// record counts everything dropped from one ring buffer, which all
	// events on that CPU share; the id only names the buffer's owner. perf
	// 6.x writes both kinds for the same losses: do not add them up.
	LostBuffer uint64

	named bool // Name came from the file, not synthesized

	// packed: 1 if this is schema.PackedEvent in the row layout, 3 in the
	// column layout, 2 if schema.StackDeltaEvent (the samples of all three
	// are expanded), -1 if neither, 0 until its format is known. packing, layout: how samples
	// of this event are packed (packedLayout).
	packed, packing int8
	layout          *packedLayout
}

// Order selects how records are delivered.
type Order int

const (
	TimeOrder Order = iota // default: sorted by time using FINISHED_ROUND, as perf does
	FileOrder              // as stored in the file
)

// Options configures a Reader.
type Options struct {
	Order Order
	// QueueSize bounds the bytes held back for time ordering (record
	// bytes plus a per-record overhead), like perf report --queue-size;
	// 0 means DefaultQueueSize. perf orders records only up to each
	// FINISHED_ROUND; a recording without them (or an endless pipe) would
	// otherwise be held in memory whole. When the queue is full its oldest
	// records are delivered early; records that arrive later with earlier
	// times are then delivered out of order and counted in Stats.Unordered.
	QueueSize int64
	// MaxInflated caps the bytes decompressed from COMPRESSED records of
	// one input; 0 means DefaultMaxInflated. Beyond the first 4 MiB the
	// data must also not expand more than MaxInflateRatio times the
	// compressed bytes read, counting each record as 256 bytes more than
	// it holds (perf's zstd reaches about 100×), so that reading costs a
	// bounded time per byte of input.
	MaxInflated int64
	// MaxInflateRatio is that ratio; 0 means DefaultMaxInflateRatio, a
	// negative value none.
	MaxInflateRatio int64
}

// Defaults for Options.
const (
	DefaultQueueSize   = 64 << 20
	DefaultMaxInflated = 64 << 30
	// DefaultMaxInflateRatio is ten times what perf's zstd reaches on
	// DWARF-stack recordings.
	DefaultMaxInflateRatio = 1000
)

// Stats counts what the reader has delivered (like perf report --stats).
type Stats struct {
	Records     [128]uint64 // by record type; types >= 128 are counted in Records[0]
	Samples     uint64
	Lost        uint64 // events lost, summed over LOST records
	LostSamples uint64 // samples lost, summed over LOST_SAMPLES records
	Compressed  uint64 // COMPRESSED/COMPRESSED2 records expanded
	Unordered   uint64 // timed records that arrived after a later time had been flushed
	// QueueFlushes counts the times the time-order queue reached
	// Options.QueueSize and its oldest records were delivered early.
	QueueFlushes uint64
	QueuePeak    uint64 // most bytes the time-order queue held: at most Options.QueueSize and one record
	BadRecords   uint64 // records whose contents did not parse (delivered as *Raw)
	// Packed counts packed and stack-delta samples (schema.PackedEvent,
	// schema.StackDeltaEvent), Unpacked the samples they held: each is
	// delivered as those, which Samples and Records count (perf counts
	// the packed ones).
	Packed, Unpacked uint64
	FirstSample      uint64 // time of the first and last sample delivered (0 without PERF_SAMPLE_TIME)
	LastSample       uint64
}

// RecordCounts yields the number of records delivered per record type, in
// type order, skipping types never seen. Types >= 128 are yielded together
// as type 0 (which no record has).
func (s *Stats) RecordCounts() iter.Seq2[RecordType, uint64] {
	return func(yield func(RecordType, uint64) bool) {
		for t, n := range s.Records {
			if n > 0 && !yield(RecordType(t), n) {
				return
			}
		}
	}
}

// ErrNotPerfData is wrapped by the error New and Open return when the input
// does not start with a perf.data magic.
var ErrNotPerfData = errors.New("not a perf.data file")

// FormatError reports bad input at a file offset.
type FormatError struct {
	Offset int64  // file offset of the bad input
	Msg    string // what is wrong
	Err    error  // the underlying cause, or nil
	// Truncated: the input ends before the end of what it describes (a
	// record, a compressed block, the data section).
	Truncated bool
}

// Error returns Msg, the offset in hex and the cause, as
// "msg (at 0x1a8): cause".
func (e *FormatError) Error() string {
	s := fmt.Sprintf("%s (at 0x%x)", e.Msg, e.Offset)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *FormatError) Unwrap() error { return e.Err }

type qent struct {
	time uint64
	rec  rawRec
}

// qentCost is what one queued record costs besides its bytes: its entry in
// pending and, when flushed, in ready (both slices grow by doubling).
const qentCost = 3 * int64(unsafe.Sizeof(qent{}))

// cost is what a queued record holds in memory. Records in a file mapping
// cost only their entry: their pages are the mapping's (see residency).
func (e *qent) cost() int64 {
	c := qentCost + int64(len(e.rec.extra))
	if e.rec.ch != nil {
		c += int64(len(e.rec.data))
	}
	return c
}

// maxWarnings bounds the warnings kept; later ones are counted.
const maxWarnings = 100

// Reader decodes a perf.data file (file or pipe mode).
//
//	r, err := perfdata.Open(path, nil)
//	for r.Next() { switch rec := r.Record().(type) { case *perfdata.Sample: ... } }
//	if err := r.Err(); err != nil { ... }
//	for _, w := range r.Warnings() { ... }
//
// Records, and the slices they hold, are reused by the next call to Next
// and, for files opened with Open, unmapped by Close. A Reader that decoded
// compressed data runs a decoder goroutine until Close: always call Close.
// A Reader is not safe for concurrent use.
type Reader struct {
	opts   Options
	bo     binary.ByteOrder
	meta   Meta
	events []*Event
	ids    idLookup

	src     source
	closers []func() error

	rec      records
	cur      Record
	curChunk *chunk

	q orderQueue

	err       error
	warnings  []error
	nwarnings int
	stats     Stats

	// packPrev holds a packed sample's previous field values while it is
	// expanded, packFields the fields of all packable events so far.
	packPrev    []uint64
	packStreams []packStream
	packFields  int
	// deltas holds each thread's previous sample a stack-delta sample
	// stood for.
	deltas deltaState
}

// idLookup finds the event a record's id names.
type idLookup struct {
	byID   map[uint64]*Event
	lastID uint64
	lastEv *Event

	sampleIDPos  int // word index of the id in a sample, -1: none
	trailerIDPos int // word index from the end of the id in a trailer, -1: none
	allIdent     bool
}

// orderQueue holds the records read but not yet handed out, to give them
// out in time order.
type orderQueue struct {
	pending   []qent
	sorted    bool
	lastPend  uint64
	ready     []qent
	readyPos  int
	nextFlush uint64
	maxTime   uint64
	lastFlush uint64
	eof       bool
	queued    int64 // summed cost of pending
	queueMax  int64
}

func newReader(opts *Options) *Reader {
	r := &Reader{ids: idLookup{byID: make(map[uint64]*Event), sampleIDPos: -1, trailerIDPos: -1}, q: orderQueue{sorted: true}}
	r.rec.index()
	if opts != nil {
		r.opts = *opts
	}
	r.q.queueMax = r.opts.QueueSize
	if r.q.queueMax <= 0 {
		r.q.queueMax = DefaultQueueSize
	}
	r.src.maxInflated = r.opts.MaxInflated
	if r.src.maxInflated <= 0 {
		r.src.maxInflated = DefaultMaxInflated
	}
	switch r.src.maxRatio = r.opts.MaxInflateRatio; {
	case r.src.maxRatio == 0:
		r.src.maxRatio = DefaultMaxInflateRatio
	case r.src.maxRatio < 0:
		r.src.maxRatio = math.MaxInt64 / (1 << 40) // a ratio no file reaches
	}
	r.src.r = r
	return r
}

// Open opens path ("-" is not special here) and detects file or pipe mode.
// The file is memory mapped when possible.
func Open(path string, opts *Options) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r := newReader(opts)
	r.closers = append(r.closers, f.Close)
	if fi.Mode().IsRegular() {
		err = r.initFile(f, fi.Size())
	} else {
		// A FIFO or character device: read it as a stream.
		err = r.initStream(f)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// New decodes a file-mode (or pipe-mode) recording held in r of the given
// size. When r is an *os.File it is memory mapped; Close unmaps it but does
// not close r.
func New(ra io.ReaderAt, size int64, opts *Options) (*Reader, error) {
	r := newReader(opts)
	if err := r.initFile(ra, size); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// initFile memory maps ra when it is an *os.File (keeping the unmapping for
// Close) and reads the recording's header.
func (r *Reader) initFile(ra io.ReaderAt, size int64) error {
	var mem []byte
	if f, ok := ra.(*os.File); ok {
		m, unmap := mmapFile(f, size)
		if unmap != nil {
			mem = m
			r.closers = append(r.closers, unmap)
			r.src.res.mapping = m
		}
	}
	return r.init(ra, size, mem)
}

// NewStream decodes a pipe-mode recording from a stream such as stdin.
// (A file-mode recording needs seeking: use Open or New.)
func NewStream(rd io.Reader, opts *Options) (*Reader, error) {
	r := newReader(opts)
	if err := r.initStream(rd); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func badMagic(magic []byte) error {
	return &FormatError{Offset: 0, Msg: fmt.Sprintf("bad magic %q", magic), Err: ErrNotPerfData}
}

func (r *Reader) setMagic(magic []byte) error {
	switch string(magic) {
	case MagicLE:
		r.bo = binary.LittleEndian
	case MagicBE:
		r.bo = binary.BigEndian
		r.meta.BigEndian = true
	default:
		return badMagic(magic)
	}
	return nil
}

func (r *Reader) initStream(rd io.Reader) error {
	var h [pipeHeaderSize]byte
	n, err := io.ReadFull(rd, h[:])
	if err != nil {
		if n < 8 {
			return &FormatError{Offset: 0, Msg: fmt.Sprintf("input too short (%d bytes) for a perf.data header", n), Err: ErrNotPerfData}
		}
		if err := r.setMagic(h[:8]); err != nil {
			return err
		}
		return &FormatError{Offset: int64(n), Msg: "pipe header truncated", Err: err}
	}
	if err := r.setMagic(h[:8]); err != nil {
		return err
	}
	hs := r.bo.Uint64(h[8:])
	if hs != pipeHeaderSize {
		return &FormatError{Offset: 8, Msg: fmt.Sprintf("header size %d: a file-mode perf.data (not pipe mode) cannot be read from a stream; pass a file instead", hs)}
	}
	r.meta.PipeMode = true
	r.meta.HeaderSize = pipeHeaderSize
	r.meta.DataOffset = pipeHeaderSize
	r.src.sr = rd
	r.src.streamPos = pipeHeaderSize
	return nil
}

// readAt reads [off, off+n) from ra or mem, bounded by size.
func readAt(ra io.ReaderAt, mem []byte, size, off int64, n uint64, what string) ([]byte, error) {
	if off < 0 || off > size || n > uint64(size-off) {
		return nil, &FormatError{Offset: off, Msg: fmt.Sprintf("%s of %d bytes at 0x%x runs past the end of the file (size 0x%x)", what, n, off, size)}
	}
	if mem != nil {
		return mem[off : off+int64(n) : off+int64(n)], nil
	}
	if n > maxFeatureSize {
		// size is the caller's claim, not proof the bytes exist: do not
		// allocate by it beyond what any real header section needs.
		return nil, &FormatError{Offset: off, Msg: fmt.Sprintf("%s claims %d bytes, more than any perf.data header section holds", what, n)}
	}
	b := make([]byte, n)
	if _, err := ra.ReadAt(b, off); err != nil && !(err == io.EOF && n == 0) {
		return nil, &FormatError{Offset: off, Msg: "reading " + what, Err: err}
	}
	return b, nil
}

func (r *Reader) init(ra io.ReaderAt, size int64, mem []byte) error {
	r.meta.FileSize = size
	if size < 16 {
		return &FormatError{Offset: 0, Msg: fmt.Sprintf("input too short (%d bytes) for a perf.data header", size), Err: ErrNotPerfData}
	}
	h, err := readAt(ra, mem, size, 0, 16, "file header")
	if err != nil {
		return err
	}
	if err := r.setMagic(h[:8]); err != nil {
		return err
	}
	hs := r.bo.Uint64(h[8:])
	if hs == pipeHeaderSize {
		r.meta.PipeMode = true
		r.meta.HeaderSize = pipeHeaderSize
		r.meta.DataOffset = pipeHeaderSize
		if mem != nil {
			r.src.mem = mem[pipeHeaderSize:]
			r.src.memBase = pipeHeaderSize
		} else {
			r.src.sr = io.NewSectionReader(ra, pipeHeaderSize, size-pipeHeaderSize)
			r.src.streamPos = pipeHeaderSize
		}
		return nil
	}
	if hs < fileHeaderSize {
		return &FormatError{Offset: 8, Msg: fmt.Sprintf("header size %d, want %d (file mode) or %d (pipe mode)", hs, fileHeaderSize, pipeHeaderSize)}
	}
	h, err = readAt(ra, mem, size, 0, fileHeaderSize, "file header")
	if err != nil {
		return err
	}
	bo := r.bo
	r.meta.HeaderSize = int64(hs)
	attrSize := bo.Uint64(h[16:])
	attrsOff, attrsSize := bo.Uint64(h[24:]), bo.Uint64(h[32:])
	dataOff, dataSize := bo.Uint64(h[40:]), bo.Uint64(h[48:])
	var featMask [4]uint64
	for i := range featMask {
		featMask[i] = bo.Uint64(h[72+8*i:])
	}

	// Attributes.
	if attrSize < attrSizeVer0+16 || attrSize > 1<<16 {
		return &FormatError{Offset: 16, Msg: fmt.Sprintf("attr entry size %d is not plausible (perf writes sizeof(perf_event_attr)+16)", attrSize)}
	}
	attrs, err := readAt(ra, mem, size, int64(attrsOff), attrsSize, "attr section")
	if err != nil {
		return err
	}
	for i := 0; uint64(i+1)*attrSize <= uint64(len(attrs)); i++ {
		ent := attrs[uint64(i)*attrSize : uint64(i+1)*attrSize]
		ap := ent[:attrSize-16]
		if n := attrLen(ap, bo); n < len(ap) {
			ap = ap[:n]
		}
		ev := &Event{Index: i, Attr: parseAttr(ap, bo)}
		idOff, idSize := bo.Uint64(ent[attrSize-16:]), bo.Uint64(ent[attrSize-8:])
		ids, err := readAt(ra, mem, size, int64(idOff), idSize, "attr id table")
		if err != nil {
			return err
		}
		for k := 0; k+8 <= len(ids); k += 8 {
			ev.IDs = append(ev.IDs, bo.Uint64(ids[k:]))
		}
		r.addEvent(ev)
	}
	if len(r.events) == 0 {
		return &FormatError{Offset: 24, Msg: "no events (empty attr section)"}
	}

	// Data section. perf writes the header with data size 0 first and
	// rewrites it when it finishes; size 0 means perf did not finish.
	r.meta.DataOffset = int64(dataOff)
	if dataOff > uint64(size) {
		return &FormatError{Offset: 40, Msg: fmt.Sprintf("data section offset 0x%x is past the end of the file (size 0x%x); the file is truncated", dataOff, size)}
	}
	avail := uint64(size) - dataOff
	featuresOK := true
	var feats []Feature
	for bit := 0; bit < featBits; bit++ {
		if featMask[bit/64]&(1<<(bit%64)) != 0 {
			feats = append(feats, Feature(bit))
		}
	}
	switch {
	case dataSize == 0 && r.plausibleFeatureTable(ra, mem, size, int64(dataOff), len(feats)):
		// A finished recording without records.
	case dataSize == 0:
		dataSize = avail
		featuresOK = false
		r.meta.Truncated = true
		r.warn(&FormatError{Offset: 48, Msg: "the header's data size is 0: perf record did not finish writing this file; reading records up to the end of the file, header features are missing", Truncated: true})
	case dataSize > avail:
		r.warn(&FormatError{Offset: int64(dataOff + avail), Msg: fmt.Sprintf("data section should end at 0x%x but the file ends at 0x%x: the file is truncated", dataOff+dataSize, size), Truncated: true})
		r.meta.Truncated = true
		dataSize = avail
		featuresOK = false
	}
	r.meta.DataSize = int64(dataSize)
	if mem != nil {
		r.src.mem = mem[dataOff : dataOff+dataSize]
		r.src.memBase = int64(dataOff)
	} else {
		r.src.sr = io.NewSectionReader(ra, int64(dataOff), int64(dataSize))
		r.src.streamPos = int64(dataOff)
	}

	// Feature sections: a table of {offset,size} after the data, one per
	// set bit. Errors here are warnings: the samples are still good.
	if featuresOK {
		tabOff := int64(dataOff + dataSize)
		tab, err := readAt(ra, mem, size, tabOff, uint64(len(feats))*16, "feature section table")
		if err != nil {
			r.warn(err)
			feats = nil
		}
		// Order does not matter: names from EVENT_DESC win over names made
		// from TRACING_DATA formats whichever comes first.
		for i, f := range feats {
			r.meta.Features = append(r.meta.Features, f)
			off, n := bo.Uint64(tab[16*i:]), bo.Uint64(tab[16*i+8:])
			if n > maxFeatureSize {
				r.warn(&FormatError{Offset: tabOff + int64(16*i), Msg: fmt.Sprintf("feature %s claims %d bytes; skipped", f.String(), n)})
				continue
			}
			p, err := readAt(ra, mem, size, int64(off), n, "feature "+f.String())
			if err != nil {
				r.warn(err)
				continue
			}
			if err := r.parseFeature(f, p, int64(off)); err != nil {
				r.warn(fmt.Errorf("feature %s: %w", f.String(), err))
			}
		}
	}
	if !featuresOK || r.meta.Tracing == nil {
		r.readEarlyFeatures(ra, mem, size, max(uint64(hs), attrsOff+attrsSize), dataOff)
	}
	r.finishEvents()
	return nil
}

// plausibleFeatureTable reports whether a feature section table of n
// entries at off points at sections inside the file, after the table.
func (r *Reader) plausibleFeatureTable(ra io.ReaderAt, mem []byte, size, off int64, n int) bool {
	if n == 0 {
		return off == size
	}
	tab, err := readAt(ra, mem, size, off, uint64(n)*16, "feature section table")
	if err != nil {
		return false
	}
	end := uint64(off) + uint64(n)*16
	for i := 0; i < n; i++ {
		o, l := r.bo.Uint64(tab[16*i:]), r.bo.Uint64(tab[16*i+8:])
		if o < end || o > uint64(size) || l > uint64(size)-o {
			return false
		}
	}
	return true
}

// addEvent registers an event and its ids.
func (r *Reader) addEvent(ev *Event) {
	ev.Index = len(r.events)
	r.events = append(r.events, ev)
	for _, id := range ev.IDs {
		r.ids.byID[id] = ev
	}
	r.computeIDPos()
}

// computeIDPos finds where sample ids sit, as perf's evlist__set_id_pos does:
// from the first event's sample_type (perf requires all events to agree).
func (r *Reader) computeIDPos() {
	r.ids.lastEv = nil
	if len(r.events) == 0 {
		return
	}
	r.ids.allIdent = true
	for _, ev := range r.events {
		if ev.Attr.SampleType&SampleIdentifier == 0 {
			r.ids.allIdent = false
		}
	}
	st := r.events[0].Attr.SampleType
	switch {
	case st&SampleIdentifier != 0:
		r.ids.sampleIDPos, r.ids.trailerIDPos = 0, 1
	case st&SampleID_ != 0:
		r.ids.sampleIDPos = bits.OnesCount64(uint64(st & (SampleIP | SampleTID | SampleTime | SampleAddr)))
		r.ids.trailerIDPos = 1 + bits.OnesCount64(uint64(st&(SampleCPU|SampleStreamID)))
	default:
		r.ids.sampleIDPos, r.ids.trailerIDPos = -1, -1
	}
}

func (r *Reader) finishEvents() {
	r.attachFormats()
	for _, ev := range r.events {
		if ev.Name == "" {
			ev.Name = synthName(&ev.Attr)
		}
	}
}

func (r *Reader) lookupID(id uint64) *Event {
	if r.ids.lastEv != nil && id == r.ids.lastID {
		return r.ids.lastEv
	}
	ev := r.ids.byID[id]
	if ev != nil {
		r.ids.lastID, r.ids.lastEv = id, ev
	}
	return ev
}

// sampleEvent finds the event of a sample body (after the header).
func (r *Reader) sampleEvent(body []byte) *Event {
	switch {
	case len(r.events) == 0:
		return nil
	case len(r.events) == 1 || r.ids.sampleIDPos < 0:
		return r.events[0]
	}
	pos := r.ids.sampleIDPos * 8
	if pos+8 > len(body) {
		return nil
	}
	return r.lookupID(r.bo.Uint64(body[pos:]))
}

// trailerEvent finds the event of a non-sample kernel record from its
// sample_id_all trailer, or nil when records carry no trailer.
func (r *Reader) trailerEvent(body []byte) *Event {
	if len(r.events) == 0 || !r.events[0].Attr.SampleIDAll() {
		return nil
	}
	if len(r.events) == 1 || r.ids.trailerIDPos < 0 {
		return r.events[0]
	}
	pos := len(body) - r.ids.trailerIDPos*8
	if pos < 0 {
		return nil
	}
	return r.lookupID(r.bo.Uint64(body[pos:]))
}

// recordTime returns the timestamp perf would order a record by.
func (r *Reader) recordTime(data []byte) (uint64, bool) {
	typ := RecordType(r.bo.Uint32(data))
	body := data[8:]
	var ev *Event
	switch {
	case typ == RecordSample:
		ev = r.sampleEvent(body)
		if ev == nil || ev.Attr.SampleType&SampleTime == 0 {
			return 0, false
		}
		pos := 8 * bits.OnesCount64(uint64(ev.Attr.SampleType&(SampleIdentifier|SampleIP|SampleTID)))
		if pos+8 > len(body) {
			return 0, false
		}
		return r.bo.Uint64(body[pos:]), true
	case typ < 64:
		ev = r.trailerEvent(body)
		if ev == nil || !ev.Attr.SampleIDAll() || ev.Attr.SampleType&SampleTime == 0 {
			return 0, false
		}
		st := ev.Attr.SampleType
		pos := len(body) - trailerLen(st) + 8*bits.OnesCount64(uint64(st&SampleTID))
		if pos < 0 || pos+8 > len(body) {
			return 0, false
		}
		return r.bo.Uint64(body[pos:]), true
	}
	return 0, false
}

func (r *Reader) warn(err error) {
	r.nwarnings++
	if len(r.warnings) < maxWarnings {
		r.warnings = append(r.warnings, err)
	}
}

func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Events returns the recording's events (in pipe mode, those seen so far).
func (r *Reader) Events() []*Event { return r.events }

// Meta returns the header and feature information decoded so far.
func (r *Reader) Meta() *Meta { return &r.meta }

// Stats returns counts of what has been delivered so far.
func (r *Reader) Stats() *Stats { return &r.stats }

// Record returns the current record, valid until the next call to Next.
func (r *Reader) Record() Record { return r.cur }

// Err returns the first error that stopped decoding (a *FormatError for bad input).
func (r *Reader) Err() error { return r.err }

// Warnings returns non-fatal problems (truncation, skipped data, ...), each
// with an offset. At most 100 are kept; WarningCount tells how many there were.
func (r *Reader) Warnings() []error { return r.warnings }

// WarningCount returns the number of warnings, including those not kept.
func (r *Reader) WarningCount() int { return r.nwarnings }

// Close releases what Open opened (and the decoder goroutine of compressed
// recordings). It does not close a reader passed to New or NewStream.
func (r *Reader) Close() error {
	r.src.z.close()
	var first error
	for i := len(r.closers) - 1; i >= 0; i-- {
		if err := r.closers[i](); err != nil && first == nil {
			first = err
		}
	}
	r.closers = nil
	r.cur = nil
	r.src.mem = nil
	r.src.res.mapping = nil
	r.q.pending, r.q.ready = nil, nil
	r.q.queued = 0
	r.q.eof = true
	return first
}

// Next advances to the next record; false at the end or on error.
func (r *Reader) Next() bool {
	if r.curChunk != nil {
		r.src.arena.release(r.curChunk)
		r.curChunk = nil
	}
	r.cur = nil
	r.src.res.maybeDrop()
	for {
		if r.q.readyPos < len(r.q.ready) {
			e := &r.q.ready[r.q.readyPos]
			r.q.readyPos++
			// Records of a round are delivered hopping between the
			// CPUs' parts of it, each in memory (or in a page) not
			// read for a while: ask for the one after next now.
			if r.q.readyPos+1 < len(r.q.ready) {
				prefetchRecord(r.q.ready[r.q.readyPos+1].rec.data)
			}
			rec := e.rec
			e.rec = rawRec{}
			if r.deliver(rec) {
				return true
			}
			continue
		}
		if r.err != nil || r.q.eof {
			return false
		}
		rec, ok := r.src.next()
		if !ok {
			// At the end, and also at an error: deliver what was queued
			// for time ordering, everything up to the last whole record
			// (a corrupt record early in a long round would otherwise
			// discard the round). Err reports the error afterwards.
			r.q.eof = true
			r.flush(^uint64(0), rawRec{})
			if r.stats.QueueFlushes > 0 && r.stats.Unordered > 0 {
				r.warn(fmt.Errorf("%d records were delivered out of time order after the time-order queue filled up %d times (bound %d MiB): the recording has no FINISHED_ROUND records where it needs them; results near those records may be misordered", r.stats.Unordered, r.stats.QueueFlushes, r.q.queueMax>>20))
			}
			continue
		}
		typ := RecordType(r.bo.Uint32(rec.data))
		if typ >= 64 {
			r.processUser(typ, rec)
			if r.err != nil {
				r.q.eof = true
				r.flush(^uint64(0), rawRec{})
				continue
			}
			if typ == RecordFinishedRound && r.opts.Order == TimeOrder {
				// ordered_events__flush(OE_FLUSH__ROUND): deliver all
				// up to the previous round's largest time, then the marker.
				r.flush(r.q.nextFlush, rec)
				r.q.nextFlush = r.q.maxTime
				continue
			}
			if r.deliver(rec) {
				return true
			}
			continue
		}
		if typ == RecordSample {
			if ev := r.sampleEvent(rec.data[8:]); ev != nil && r.isPacked(ev) {
				if ev.packed == 2 {
					r.expandStackDelta(ev, rec)
				} else {
					r.expandPacked(ev, rec)
				}
				if rec.ch != nil {
					r.src.arena.release(rec.ch)
				} else {
					r.src.res.touch(rec.off, len(rec.data))
				}
				continue
			}
		}
		if r.opts.Order == TimeOrder {
			if t, ok := r.recordTime(rec.data); ok {
				r.queue(t, rec)
				continue
			}
		}
		// FileOrder, or a record without a time: perf delivers those at
		// once, ahead of the queued ones.
		if r.deliver(rec) {
			return true
		}
	}
}

func (r *Reader) queue(t uint64, rec rawRec) {
	if t < r.q.lastFlush {
		r.stats.Unordered++
	}
	if t > r.q.maxTime {
		r.q.maxTime = t
	}
	if t < r.q.lastPend {
		r.q.sorted = false
	}
	r.q.lastPend = t
	r.q.pending = append(r.q.pending, qent{t, rec})
	r.q.queued += r.q.pending[len(r.q.pending)-1].cost()
	r.stats.QueuePeak = max(r.stats.QueuePeak, uint64(r.q.queued))
	// Chunks pinned by a few queued records count too: a record with a
	// late time in every arena chunk would keep them all.
	if r.q.queued > r.q.queueMax || r.src.arena.live > r.q.queueMax {
		r.flushOldest(rec.off)
	}
}

// flushOldest delivers the oldest queued records early, as perf's
// ordered_events does with OE_FLUSH__HALF when --queue-size is reached:
// down to half the queue's bound, or everything when arena chunks pinned by
// queued records are what ran over.
func (r *Reader) flushOldest(off int64) {
	if r.stats.QueueFlushes == 0 {
		r.warn(&FormatError{Offset: off, Msg: fmt.Sprintf("time-order queue reached its bound (%d MiB) without a FINISHED_ROUND record: delivering the oldest records early; later records with earlier times are delivered out of order", r.q.queueMax>>20)})
	}
	r.stats.QueueFlushes++
	if !r.q.sorted {
		slices.SortStableFunc(r.q.pending, func(a, b qent) int { return cmp.Compare(a.time, b.time) })
		r.q.sorted = true
	}
	limit := ^uint64(0)
	if r.src.arena.live <= r.q.queueMax {
		left := r.q.queued
		for i := range r.q.pending {
			if left <= r.q.queueMax/2 {
				break
			}
			left -= r.q.pending[i].cost()
			limit = r.q.pending[i].time
		}
	}
	r.flush(limit, rawRec{})
}

// flush moves every pending record with time <= limit to the ready list, in
// time order (stable: equal times keep file order), followed by marker when
// it is set.
func (r *Reader) flush(limit uint64, marker rawRec) {
	if !r.q.sorted {
		slices.SortStableFunc(r.q.pending, func(a, b qent) int { return cmp.Compare(a.time, b.time) })
		r.q.sorted = true
	}
	k := sort.Search(len(r.q.pending), func(i int) bool { return r.q.pending[i].time > limit })
	r.q.ready = append(r.q.ready[:0], r.q.pending[:k]...)
	r.q.readyPos = 0
	for i := range r.q.ready {
		r.q.queued -= r.q.ready[i].cost()
	}
	if k > 0 {
		r.q.lastFlush = r.q.pending[k-1].time
	}
	n := copy(r.q.pending, r.q.pending[k:])
	clear(r.q.pending[n:])
	r.q.pending = r.q.pending[:n]
	if n > 0 {
		r.q.lastPend = r.q.pending[n-1].time
	} else {
		r.q.lastPend = 0
	}
	if marker.data != nil {
		r.q.ready = append(r.q.ready, qent{rec: marker})
	}
}
