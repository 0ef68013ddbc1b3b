package perfdata

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Writer-side layout constants (tools/perf/util/header.c and
// tools/lib/perf/include/perf/event.h).
const (
	// writerAttrSize is the perf_event_attr size the writer stores
	// (PERF_ATTR_SIZE_VER7: up to sig_data), what perf 6.1 writes.
	writerAttrSize = 128
	// fileSectionSize is sizeof(struct perf_file_section): offset, size.
	fileSectionSize = 16
	// nameAlign is NAME_ALIGN: header strings and build-id file names are
	// padded to it.
	nameAlign = 64
	// MiscUser is PERF_RECORD_MISC_USER, the cpumode of user-space records.
	MiscUser = 2
	// buildIDSlot is the size of the build_id array in
	// perf_record_header_build_id (20 bytes of id, size byte, padding).
	buildIDSlot = 24
	// maxCompressedPayload keeps a COMPRESSED record under header.size's
	// u16 limit.
	maxCompressedPayload = 65535 - 8
	// compressMmapLen is what the COMPRESSED feature announces as
	// mmap_len: perf decompresses each record into a buffer of this size,
	// which must hold one record's output (at most a chunk, zwriter.go)
	// and the unfinished record carried over from the one before.
	compressMmapLen = 1 << 20
	// writeBuffer is the size of a Writer's output buffer: a write
	// system call per 256 KiB is few, and a buffer larger than that only
	// touches more memory for the first time (a 1 MiB buffer made a short
	// recording measurably slower).
	writeBuffer = 256 << 10
)

// WriterEvent is one event of a recording being written: its attr, its
// name (EVENT_DESC) and the sample ids the kernel gave its file descriptors.
type WriterEvent struct {
	Attr Attr
	Name string
	IDs  []uint64
}

// WriterFeatures are the header feature sections written by Finish. Empty
// fields are left out.
type WriterFeatures struct {
	TracingData     []byte // see BuildTracingData
	BuildIDs        []BuildID
	Hostname        string
	OSRelease       string
	Version         string
	Arch            string
	NrCPUsAvail     uint32
	NrCPUsOnline    uint32
	TotalMemKB      uint64
	Cmdline         []string
	SampleTimeFirst uint64
	SampleTimeLast  uint64
}

// WriterOptions choose how a recording is written.
type WriterOptions struct {
	// Compress writes the data section as zstd COMPRESSED records (perf -z).
	Compress bool
	// Level is the zstd level for Compress (0: the encoder's default).
	Level int
	// KeepUp: with Compress, a chunk of records that would wait for the
	// compressor behind several others is written uncompressed, so that
	// WriteRecord never waits for compression; UncompressedBytes tells
	// how much was.
	KeepUp bool
	// Early also stores TracingData and the event names before the data
	// section, and a header that reads as "not finished" until Finish, so
	// that a file cut short still decodes, with its tracepoint formats
	// and event names.
	Early bool
	// TracingData is the tracing data Early stores (BuildTracingData's
	// output).
	TracingData []byte
}

// WriterTarget is where a Writer writes: sequential writes for the data,
// and WriteAt to fill in the file header once sizes are known.
type WriterTarget interface {
	io.Writer
	io.WriterAt
}

// Writer writes a file-mode perf.data: the header, the attrs with their ids,
// a data section of records handed to WriteRecord, and feature sections.
// The file is valid only after Finish. NewPipeWriter makes one that writes
// pipe mode instead.
type Writer struct {
	out      WriterTarget
	bw       *bufio.Writer
	pos      int64 // bytes written to out so far
	events   []WriterEvent
	attrs    fileSection
	dataOff  int64
	zp       *zpipe // the compression pipeline (zwriter.go), or nil
	zlevel   int
	zbytes   int64 // compressed payload bytes written
	zin      int64 // the record bytes behind them
	rawBytes int64
	pipe     *pipeState // pipe mode only (pipewriter.go)
	err      error
	hdr      [8]byte
	scratch  []byte // RecordBuffer's, when records are not gathered for compression
}

type fileSection struct{ off, size int64 }

// NewWriter starts a recording on out (positioned at offset 0) with the
// given events, all of whose ids must be known now.
func NewWriter(out WriterTarget, events []WriterEvent, opts *WriterOptions) (*Writer, error) {
	if len(events) == 0 {
		return nil, errors.New("perfdata: writer needs at least one event")
	}
	w := &Writer{out: out, bw: bufio.NewWriterSize(out, writeBuffer), events: events}
	// Placeholder header; Finish rewrites it.
	w.write(make([]byte, fileHeaderSize))
	// ids arrays first, then the attr table pointing at them.
	idOff := make([]int64, len(events))
	for i, ev := range events {
		idOff[i] = w.pos
		b := make([]byte, 8*len(ev.IDs))
		for k, id := range ev.IDs {
			binary.LittleEndian.PutUint64(b[8*k:], id)
		}
		w.write(b)
	}
	w.attrs.off = w.pos
	for i, ev := range events {
		b := appendAttr(nil, &ev.Attr)
		b = binary.LittleEndian.AppendUint64(b, uint64(idOff[i]))
		b = binary.LittleEndian.AppendUint64(b, uint64(8*len(ev.IDs)))
		w.write(b)
	}
	w.attrs.size = w.pos - w.attrs.off
	if opts != nil && opts.Early {
		w.write(w.appendEarlyFeatures(nil, opts.TracingData))
	}
	w.dataOff = w.pos
	if opts != nil && opts.Early {
		w.writeUnfinishedHeader()
	}
	if err := w.startCompression(opts); err != nil {
		return nil, err
	}
	return w, w.err
}

// startCompression sets up the compression of the data section when opts
// ask for it.
func (w *Writer) startCompression(opts *WriterOptions) error {
	if opts == nil || !opts.Compress {
		return nil
	}
	w.zlevel = 3 // zstd's default level, what SpeedDefault stands for
	if opts.Level > 0 {
		w.zlevel = opts.Level
	}
	zp, err := newZpipe(w, w.zlevel, opts.KeepUp)
	if err != nil {
		return err
	}
	w.zp = zp
	return nil
}

func (w *Writer) write(p []byte) {
	if w.err != nil {
		return
	}
	n, err := w.bw.Write(p)
	w.pos += int64(n)
	w.err = err
}

// WriteRecord appends one whole record (its perf_event_header included) to
// the data section. It does not keep rec.
func (w *Writer) WriteRecord(rec []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(rec) < 8 || int(binary.LittleEndian.Uint16(rec[6:])) != len(rec) {
		return fmt.Errorf("perfdata: WriteRecord: record of %d bytes whose header says otherwise", len(rec))
	}
	w.rawBytes += int64(len(rec))
	if w.zp == nil {
		w.write(rec)
		return w.err
	}
	w.err = w.zp.add(rec, nil)
	return w.err
}

// WriteRecordParts writes a record given as its header fields and body,
// saving the caller a copy; size is taken from len(body)+8.
func (w *Writer) WriteRecordParts(typ uint32, misc uint16, body []byte) error {
	if w.err != nil {
		return w.err
	}
	n := len(body) + 8
	if n > 0xffff {
		return fmt.Errorf("perfdata: record of %d bytes exceeds the u16 size field", n)
	}
	binary.LittleEndian.PutUint32(w.hdr[0:], typ)
	binary.LittleEndian.PutUint16(w.hdr[4:], misc)
	binary.LittleEndian.PutUint16(w.hdr[6:], uint16(n))
	w.rawBytes += int64(n)
	if w.zp == nil {
		w.write(w.hdr[:])
		w.write(body)
		return w.err
	}
	w.err = w.zp.add(w.hdr[:], body)
	return w.err
}

// RecordBuffer returns an empty slice with room for one record of up to
// max bytes, header included, in the place the record will be written
// from: a caller that builds its record there (8 bytes for the header,
// then the body) and hands it to CommitRecord saves WriteRecordParts'
// copy. Nothing else may be written in between; a record that outgrows
// max is copied as WriteRecordParts would.
func (w *Writer) RecordBuffer(max int) []byte {
	if w.zp != nil && w.err == nil {
		b, err := w.zp.room(max)
		if err != nil {
			w.err = err
		}
		if b != nil {
			return b
		}
	}
	if cap(w.scratch) < max {
		w.scratch = make([]byte, 0, max)
	}
	return w.scratch[:0:max]
}

// CommitRecord writes rec, built in RecordBuffer's slice, after filling
// in its header: typ, misc and the size, len(rec).
func (w *Writer) CommitRecord(typ uint32, misc uint16, rec []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(rec) < 8 || len(rec) > 0xffff {
		return fmt.Errorf("perfdata: record of %d bytes: not 8 to 65535", len(rec))
	}
	binary.LittleEndian.PutUint32(rec[0:], typ)
	binary.LittleEndian.PutUint16(rec[4:], misc)
	binary.LittleEndian.PutUint16(rec[6:], uint16(len(rec)))
	w.rawBytes += int64(len(rec))
	switch {
	case w.zp == nil:
		w.write(rec)
	case w.zp.inPlace(rec):
		w.zp.cur.in = w.zp.cur.in[:len(w.zp.cur.in)+len(rec)]
	default:
		w.err = w.zp.add(rec, nil)
	}
	return w.err
}

// featureSection is one header feature: its bit and its section's bytes.
type featureSection struct {
	bit  Feature
	body []byte
}

// featureSections lists the non-empty features of f, and those the writer
// adds itself (EVENT_DESC, COMPRESSED), in bit order.
func (w *Writer) featureSections(f *WriterFeatures) []featureSection {
	if f == nil {
		f = &WriterFeatures{}
	}
	var feats []featureSection
	add := func(bit Feature, body []byte) { feats = append(feats, featureSection{bit, body}) }
	if len(f.TracingData) > 0 {
		add(FeatTracingData, f.TracingData)
	}
	if len(f.BuildIDs) > 0 {
		add(FeatBuildID, appendBuildIDs(nil, f.BuildIDs))
	}
	if f.Hostname != "" {
		add(FeatHostname, appendHeaderString(nil, f.Hostname))
	}
	if f.OSRelease != "" {
		add(FeatOSRelease, appendHeaderString(nil, f.OSRelease))
	}
	if f.Version != "" {
		add(FeatVersion, appendHeaderString(nil, f.Version))
	}
	if f.Arch != "" {
		add(FeatArch, appendHeaderString(nil, f.Arch))
	}
	if f.NrCPUsOnline > 0 {
		b := binary.LittleEndian.AppendUint32(nil, f.NrCPUsAvail)
		add(FeatNrCPUs, binary.LittleEndian.AppendUint32(b, f.NrCPUsOnline))
	}
	if f.TotalMemKB > 0 {
		add(FeatTotalMem, binary.LittleEndian.AppendUint64(nil, f.TotalMemKB))
	}
	if len(f.Cmdline) > 0 {
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(f.Cmdline)))
		for _, s := range f.Cmdline {
			b = appendHeaderString(b, s)
		}
		add(FeatCmdline, b)
	}
	add(FeatEventDesc, w.eventDesc())
	if f.SampleTimeLast > 0 {
		b := binary.LittleEndian.AppendUint64(nil, f.SampleTimeFirst)
		add(FeatSampleTime, binary.LittleEndian.AppendUint64(b, f.SampleTimeLast))
	}
	if w.zp != nil {
		// struct { u32 version, type, level, ratio, mmap_len }: perf sizes
		// its decompression buffer by mmap_len.
		ratio := uint32(1)
		if w.zbytes > 0 {
			ratio = uint32(max(1, (w.zin+w.zbytes/2)/w.zbytes))
		}
		var b []byte
		for _, v := range []uint32{0, CompressZstd, uint32(w.zlevel), ratio, compressMmapLen} {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		add(FeatCompressed, b)
	}
	return feats
}

// endCompression compresses and writes the rest of the data section and
// stops the compression pipeline.
func (w *Writer) endCompression() error {
	if w.zp == nil || w.err != nil {
		if w.zp != nil {
			w.zp.stop()
		}
		return w.err
	}
	w.err = w.zp.finish()
	return w.err
}

// Finish writes the feature sections and the file header. The target is
// complete (but not synced or closed) when it returns nil.
func (w *Writer) Finish(f *WriterFeatures) error {
	if w.pipe != nil {
		return w.finishPipe(f)
	}
	if err := w.endCompression(); err != nil {
		return err
	}
	dataSize := w.pos - w.dataOff
	feats := w.featureSections(f)
	// The feature index follows the data section directly, then the
	// sections in bit order.
	off := w.pos + int64(fileSectionSize*len(feats))
	var index []byte
	for _, ft := range feats {
		index = binary.LittleEndian.AppendUint64(index, uint64(off))
		index = binary.LittleEndian.AppendUint64(index, uint64(len(ft.body)))
		off += int64(len(ft.body))
	}
	w.write(index)
	for _, ft := range feats {
		w.write(ft.body)
	}
	if w.err == nil {
		w.err = w.bw.Flush()
	}
	if w.err != nil {
		return w.err
	}
	h := w.fileHeader(dataSize)
	for _, ft := range feats {
		h[72+ft.bit/8] |= 1 << (ft.bit % 8)
	}
	if _, err := w.out.WriteAt(h, 0); err != nil {
		w.err = err
	}
	return w.err
}

// fileHeader returns the file header for a data section of dataSize bytes,
// without feature bits.
func (w *Writer) fileHeader(dataSize int64) []byte {
	h := make([]byte, fileHeaderSize)
	copy(h, MagicLE)
	le := binary.LittleEndian
	le.PutUint64(h[8:], fileHeaderSize)
	le.PutUint64(h[16:], writerAttrSize+fileSectionSize)
	le.PutUint64(h[24:], uint64(w.attrs.off))
	le.PutUint64(h[32:], uint64(w.attrs.size))
	le.PutUint64(h[40:], uint64(w.dataOff))
	le.PutUint64(h[48:], uint64(dataSize))
	// event_types (48..64 of the sections) stays empty.
	return h
}

// DataBytes returns the uncompressed bytes of records written so far.
func (w *Writer) DataBytes() int64 { return w.rawBytes }

// FileBytes returns the bytes written to the target so far.
func (w *Writer) FileBytes() int64 { return w.pos }

// UncompressedBytes returns, after Finish, how many record bytes of a
// compressed data section were written uncompressed (KeepUp, or data
// that does not compress).
func (w *Writer) UncompressedBytes() int64 {
	if w.zp == nil {
		return 0
	}
	return w.rawBytes - w.zin
}

// eventDesc builds EVENT_DESC: u32 nr, u32 attr_size, then per event the
// attr, u32 nr_ids, the name as a header string, u64 ids[nr_ids].
func (w *Writer) eventDesc() []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, uint32(len(w.events)))
	b = le.AppendUint32(b, writerAttrSize)
	for _, ev := range w.events {
		b = appendAttr(b, &ev.Attr)
		b = le.AppendUint32(b, uint32(len(ev.IDs)))
		b = appendHeaderString(b, ev.Name)
		for _, id := range ev.IDs {
			b = le.AppendUint64(b, id)
		}
	}
	return b
}

// appendAttr appends a as a PERF_ATTR_SIZE_VER7 perf_event_attr, the inverse
// of parseAttr: Attr's layout cut to writerAttrSize bytes, size set to that.
func appendAttr(b []byte, a *Attr) []byte {
	v := *a
	v.Size = writerAttrSize
	var p [attrSizeVer8]byte
	if _, err := binary.Encode(p[:], binary.LittleEndian, &v); err != nil {
		// Unreachable: p is exactly Attr's size (TestAttrLayout).
		panic("perfdata: Attr does not match perf_event_attr: " + err.Error())
	}
	return append(b, p[:writerAttrSize]...)
}

// appendHeaderString appends perf's do_write_string form: u32 length
// (NUL included, padded to NAME_ALIGN), the bytes, zero padding.
func appendHeaderString(b []byte, s string) []byte {
	n := (len(s) + 1 + nameAlign - 1) / nameAlign * nameAlign
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, s...)
	return append(b, make([]byte, n-len(s))...)
}

// appendBuildIDs appends BUILD_ID entries: perf_record_header_build_id
// (header, pid, build_id[24] with the id's length in byte 20 and
// PERF_RECORD_MISC_BUILD_ID_SIZE set, file name padded to NAME_ALIGN).
func appendBuildIDs(b []byte, ids []BuildID) []byte {
	le := binary.LittleEndian
	for _, id := range ids {
		name := (len(id.Filename) + 1 + nameAlign - 1) / nameAlign * nameAlign
		size := 8 + 4 + buildIDSlot + name
		b = le.AppendUint32(b, uint32(RecordHeaderBuildID))
		b = le.AppendUint16(b, id.Misc|miscBuildIDSize)
		b = le.AppendUint16(b, uint16(size))
		b = le.AppendUint32(b, uint32(id.Pid))
		var slot [buildIDSlot]byte
		n := copy(slot[:20], id.ID)
		slot[20] = byte(n)
		b = append(b, slot[:]...)
		b = append(b, id.Filename...)
		b = append(b, make([]byte, name-len(id.Filename))...)
	}
	return b
}
