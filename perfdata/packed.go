package perfdata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/faultline/faultline/perfdata/schema"
)

// Packed samples (schema.PackedEvent). A packed sample carries a batch of
// samples of one thread, each of an event whose sample type is packedType
// and whose raw payload is its tracepoint format's fields, laid out
// without gaps after the common fields. Each sample becomes a few varints:
// differences from the previous sample of the batch (identifier, time) and
// from the previous sample of the same event (each field), so a stream of
// similar calls costs a few bytes a call instead of a sample header, the
// common fields and whole words. The Reader expands a packed sample into
// the samples it holds, byte for byte as they would have been written one
// by one; the Packer writes them.

// packedType is the sample type of a packed sample and of the samples it
// holds.
const packedType = SampleIdentifier | SampleTID | SampleTime | SampleRaw

// The packed event's raw payload: the common fields, the count, the
// samples' __data_loc word, then the samples' bytes; in the column layout
// the count of columns before them.
const (
	packedCountAt   = 8
	packedLocAt     = 12
	packedDataAt    = 16 // the row layout's
	packedColumnsAt = 16
	packedColDataAt = 20
)

// packedHead is a sample of packedType up to its raw payload: IDENTIFIER,
// pid and tid, TIME, the raw size.
const packedHead = 8 + 8 + 8 + 4

// packedLayout is how a packable event's raw payload is laid out.
type packedLayout struct {
	typ    uint16  // the tracepoint id: common_type
	sizes  []uint8 // the fields after the common fields, in order
	raw    int     // the raw payload's size, padded as the kernel pads it
	fields int     // the payload's fields end here
	base   int     // first of this event's previous values in a batch's
}

// layoutOf finds how an event's samples are packed: nil if they cannot be
// (not a tracepoint with a format, another sample type, fields that are
// not plain integers laid out one after the other).
func layoutOf(attr *Attr, f *TraceFormat) *packedLayout {
	if f == nil || attr.Type != TypeTracepoint || attr.SampleType != packedType || f.ID > 0xffff {
		return nil
	}
	l := &packedLayout{typ: uint16(f.ID), fields: 8}
	for _, fd := range f.Fields {
		if fd.Common {
			continue
		}
		if fd.Dynamic || fd.ArrayLen != 0 || fd.Offset != l.fields || fd.bigEndian ||
			(fd.Size != 1 && fd.Size != 2 && fd.Size != 4 && fd.Size != 8) {
			return nil
		}
		l.sizes = append(l.sizes, uint8(fd.Size))
		l.fields += fd.Size
	}
	if len(l.sizes) > packedMaxFields {
		return nil
	}
	l.raw = (4+l.fields+7)&^7 - 4
	return l
}

// isPacked reports whether ev's samples are packed or stack-delta
// samples, deciding once its format is known.
func (r *Reader) isPacked(ev *Event) bool {
	if ev.packed == 0 && ev.Format != nil {
		ev.packed = -1
		switch {
		case isPackedEvent(ev):
			ev.packed = 1
			if c := ev.Format.Field("columns"); c != nil && c.Offset == packedColumnsAt && c.Size == 4 {
				ev.packed = 3
			}
		case isStackDeltaEvent(ev):
			ev.packed = 2
		}
	}
	return ev.packed > 0
}

// isPackedEvent reports whether ev is schema.PackedEvent with the layout
// this package reads.
func isPackedEvent(ev *Event) bool {
	f := ev.Format
	if f == nil || f.System != schema.System || f.Name != schema.PackedEvent || ev.Attr.SampleType != packedType {
		return false
	}
	n, d := f.Field("count"), f.Field("samples")
	return n != nil && n.Offset == packedCountAt && n.Size == 4 && d != nil && d.Dynamic && d.Offset == packedLocAt
}

// zigzag maps a difference to an unsigned varint's value, small either way.
func zigzag(d uint64) uint64 { return d<<1 ^ uint64(int64(d)>>63) }

func unzigzag(v uint64) uint64 { return v>>1 ^ -(v & 1) }

// readField reads a field of size n at p, little-endian, zero-extended.
func readField(p []byte, n uint8) uint64 {
	switch n {
	case 1:
		return uint64(p[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(p))
	case 4:
		return uint64(binary.LittleEndian.Uint32(p))
	}
	return binary.LittleEndian.Uint64(p)
}

func putField(p []byte, n uint8, v uint64) {
	switch n {
	case 1:
		p[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(p, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(p, uint32(v))
	default:
		binary.LittleEndian.PutUint64(p, v)
	}
}

// errPacked is the cause of a packed sample's FormatError.
var errPacked = errors.New("bad packed sample")

// beginExpand counts a sample of faultline's compact events (packed,
// stack delta: what names it in a warning), readies the queue for the
// samples it stands for, and returns its body (past the record header)
// and its raw payload; false, with a warning, when the body is shorter
// than packedHead and minRaw bytes of payload or the file is not
// little-endian.
func (r *Reader) beginExpand(ev *Event, rec rawRec, minRaw int, what string) (body, raw []byte, ok bool) {
	ev.Samples++
	r.stats.Packed++
	if r.opts.Order != TimeOrder {
		// Next hands out the ready records before reading another.
		r.q.ready, r.q.readyPos = r.q.ready[:0], 0
	}
	body = rec.data[8:]
	if len(body) < packedHead+minRaw || r.bo != binary.ByteOrder(binary.LittleEndian) {
		r.warn(&FormatError{Offset: rec.off, Msg: fmt.Sprintf("%s sample of %d bytes", what, len(rec.data)), Err: errPacked})
		return nil, nil, false
	}
	raw = body[packedHead:]
	if n := int(r.bo.Uint32(body[24:])); n <= len(raw) {
		raw = raw[:n]
	}
	return body, raw, true
}

// expandPacked queues (or, in file order, readies) the samples a packed
// sample holds, each built in the arena as the sample it stands for. A
// packed sample whose bytes do not parse yields the samples before the
// bad one and a warning.
func (r *Reader) expandPacked(ev *Event, rec rawRec) {
	cols := ev.packed == 3
	minRaw := packedDataAt
	if cols {
		minRaw = packedColDataAt
	}
	body, raw, ok := r.beginExpand(ev, rec, minRaw, "packed")
	if !ok {
		return
	}
	misc := r.bo.Uint16(rec.data[4:])
	id, tids, t := r.bo.Uint64(body), body[8:16], r.bo.Uint64(body[16:])
	count := r.bo.Uint32(raw[packedCountAt:])
	loc := r.bo.Uint32(raw[packedLocAt:])
	off, n := int(loc&0xffff), int(loc>>16)
	if off+n > len(raw) || uint64(count) > uint64(n) {
		r.warn(&FormatError{Offset: rec.off, Msg: fmt.Sprintf("packed sample's %d samples at %d+%d do not fit its %d-byte payload", count, off, n, len(raw)), Err: errPacked})
		return
	}
	p := raw[off : off+n]
	tid := r.bo.Uint32(tids[4:])
	prev := r.packPrev[:0]
	// The streams the differences are read from: the one of the row
	// layout, or each column's (packColumns).
	streams := r.packStreams[:0]
	if cols {
		var err string
		if streams, err = packColumns(streams, p, r.bo.Uint32(raw[packedColumnsAt:])); err != "" {
			r.warn(&FormatError{Offset: rec.off, Msg: "packed sample's " + err, Err: errPacked})
			return
		}
	} else {
		streams = append(streams, packStream{0, len(p)})
	}
	r.packStreams = streams
	// varint reads the next difference of stream k (the row layout has
	// one); ok is false past its end.
	varint := func(k int) (uint64, bool) {
		if !cols {
			k = 0
		} else if k >= len(streams) {
			return 0, false
		}
		s := &streams[k]
		v, m := binary.Uvarint(p[s.pos:s.end])
		if m <= 0 {
			return 0, false
		}
		s.pos += m
		return unzigzag(v), true
	}
	for i := uint32(0); i < count; i++ {
		start := streams[0].pos
		did, ok1 := varint(0)
		dt, ok2 := varint(1)
		id += did
		t += dt
		sev := r.lookupID(id)
		var l *packedLayout
		if sev != nil {
			l = r.packedLayout(sev)
		}
		if !ok1 || !ok2 || l == nil {
			r.warn(&FormatError{Offset: rec.off, Msg: fmt.Sprintf("packed sample's sample %d of %d (byte %d of its data) has an id (%#x) of no packable event or ends early; the rest of it skipped", i, count, start, id), Err: errPacked})
			break
		}
		if need := l.base + len(l.sizes); need > len(prev) {
			prev = append(prev, make([]uint64, need-len(prev))...)
		}
		size := 8 + packedHead + l.raw
		out, ch := r.src.arena.alloc(size)
		r.bo.PutUint32(out, uint32(RecordSample))
		r.bo.PutUint16(out[4:], misc)
		r.bo.PutUint16(out[6:], uint16(size))
		r.bo.PutUint64(out[8:], id)
		copy(out[16:24], tids)
		r.bo.PutUint64(out[24:], t)
		r.bo.PutUint32(out[32:], uint32(l.raw))
		w := out[8+packedHead:]
		r.bo.PutUint16(w, l.typ)
		w[2], w[3] = 0, 0
		r.bo.PutUint32(w[4:], tid)
		at := 8
		for k, sz := range l.sizes {
			d, ok := varint(2 + k)
			if !ok {
				break
			}
			v := &prev[l.base+k]
			*v += d
			putField(w[at:], sz, *v)
			at += int(sz)
		}
		if at != l.fields {
			r.src.arena.release(ch)
			r.warn(&FormatError{Offset: rec.off, Msg: fmt.Sprintf("packed sample's sample %d of %d ends early; the rest of it skipped", i, count), Err: errPacked})
			break
		}
		clear(w[at:])
		x := rawRec{data: out, off: rec.off, ch: ch}
		r.stats.Unpacked++
		if r.opts.Order == TimeOrder {
			r.queue(t, x)
		} else {
			r.q.ready = append(r.q.ready, qent{time: t, rec: x})
		}
	}
	clear(prev)
	r.packPrev = prev
}

// packStream is one stream of a packed sample's differences: the next
// one's offset in the samples' bytes, and the stream's end.
type packStream struct{ pos, end int }

// packColumns appends to streams the columns of a packed sample's bytes p
// in the column layout (PackedEvent): n varints, each column's length,
// then the columns in order; a message when they do not fit.
func packColumns(streams []packStream, p []byte, n uint32) ([]packStream, string) {
	if n < 2 || n > 2+packedMaxFields {
		return streams, fmt.Sprintf("%d columns (want 2 to %d)", n, 2+packedMaxFields)
	}
	pos := 0
	for k := uint32(0); k < n; k++ {
		v, m := binary.Uvarint(p[pos:])
		if m <= 0 || v > uint64(len(p)) {
			return streams, fmt.Sprintf("column %d's length does not fit its %d bytes", k, len(p))
		}
		pos += m
		streams = append(streams, packStream{end: int(v)})
	}
	for k := range streams {
		s := &streams[k]
		s.pos, s.end = pos, pos+s.end
		if s.end > len(p) {
			return streams, fmt.Sprintf("column %d ends past its %d bytes", k, len(p))
		}
		pos = s.end
	}
	return streams, ""
}

// packedLayout returns ev's layout, found once per event; nil: its
// samples cannot be packed.
func (r *Reader) packedLayout(ev *Event) *packedLayout {
	if ev.packing == 0 {
		ev.packing = -1
		if l := layoutOf(&ev.Attr, ev.Format); l != nil {
			l.base = r.packFields
			r.packFields += len(l.sizes)
			ev.layout, ev.packing = l, 1
		}
	}
	return ev.layout
}

// MaxPackedBytes bounds a packed sample's data: the record's u16 size
// holds it with room to spare, and a reader expands one batch at a time
// into at most a few hundred KiB.
const MaxPackedBytes = 16 << 10

// Packer writes samples of packable events (sample type IDENTIFIER, TID,
// TIME, RAW; tracepoint formats of plain integer fields) as packed
// samples of schema.PackedEvent, one batch per thread, flushed when
// MaxPackedBytes are reached and by Flush. Add takes the sample the
// caller would have written; the Reader gives back exactly that. Samples
// of a thread keep their order; different threads' batches interleave by
// time only once read (records are ordered by time between two
// FINISHED_ROUND records, so a caller flushes before each). A Packer
// allocates nothing once its batches have grown, and at each Flush drops
// the batches of threads without samples since the last one (keeping
// packFreeBatches of them for new threads): a program that starts and
// ends threads all the time leaves no buffers behind.
type Packer struct {
	id  uint64 // the packed event's sample id
	typ uint16 // its tracepoint id
	// dense holds the layouts of the events added, by sample id from lo.
	lo      uint64
	dense   []*packedLayout
	fields  int
	batches map[uint32]*packBatch
	order   []*packBatch // batches with samples, in the order they began
	last    *packBatch
	written uint64
	vals    [packedMaxFields]uint64 // Add's field values
	// free holds dropped batches for new threads.
	free []*packBatch
	// rowLayout: write the row layout (packedRowFormat), which files
	// written before the column layout hold (tests of their reading).
	rowLayout bool
	head      []byte // the column lengths (write)
}

// packFreeBatches bounds the Packer's free batches.
const packFreeBatches = 64

// Written returns the packed samples written so far.
func (p *Packer) Written() uint64 { return p.written }

// packBatch is one thread's samples not yet written.
type packBatch struct {
	pid, tid uint32
	t        uint64 // the batch's (its first sample's time)
	lastID   uint64
	lastT    uint64
	count    uint32
	// data holds the samples' differences in the row layout. In the
	// column layout column k is col[k*span:end[k]]: each column has a
	// region of span bytes, and room samples fit in every region.
	data   []byte
	col    []byte
	end    []int
	span   int
	room   int
	size   int // bytes in the columns
	prev   []uint64
	misc   uint16
	listed bool // in the Packer's order
}

// NewPacker returns a Packer that writes samples of the packed event with
// sample id id and tracepoint id typ.
func NewPacker(id uint64, typ uint16) *Packer {
	return &Packer{id: id, typ: typ, batches: map[uint32]*packBatch{}}
}

// maxPackedEvents bounds the sample ids a Packer packs: from the first
// added, as many as a recorder numbers its own events.
const maxPackedEvents = 4096

// AddEvent lets the Packer pack samples with id, of an event with attr and
// format f; false: they cannot be packed (Add writes them as they are),
// also when the ids added would span maxPackedEvents or more. An event may
// be added at any time, also while batches hold samples of others.
func (p *Packer) AddEvent(id uint64, attr *Attr, f *TraceFormat) bool {
	l := layoutOf(attr, f)
	if l == nil {
		return false
	}
	switch {
	case len(p.dense) == 0:
		p.lo = id
	case id < p.lo && p.lo-id < maxPackedEvents-uint64(len(p.dense)):
		p.dense = append(make([]*packedLayout, p.lo-id), p.dense...)
		p.lo = id
	}
	if id < p.lo || id-p.lo >= maxPackedEvents {
		return false
	}
	if i := int(id - p.lo); i >= len(p.dense) {
		p.dense = append(p.dense, make([]*packedLayout, i+1-len(p.dense))...)
	}
	l.base = p.fields
	p.fields += len(l.sizes)
	p.dense[id-p.lo] = l
	return true
}

// Add packs a sample's body (the record after its 8-byte header, misc
// being the header's): into its thread's batch when its event was added
// and its payload is as the Reader would rebuild it, else written to w as
// it is.
func (p *Packer) Add(w *Writer, misc uint16, body []byte) error {
	l := p.fit(body)
	if l == nil {
		return w.WriteRecordParts(uint32(RecordSample), misc, body)
	}
	vals := p.vals[:len(l.sizes)]
	at := packedHead + 8
	for k, sz := range l.sizes {
		vals[k] = readField(body[at:], sz)
		at += int(sz)
	}
	le := binary.LittleEndian
	id, pid, tid, t := le.Uint64(body), le.Uint32(body[8:]), le.Uint32(body[12:]), le.Uint64(body[16:])
	if b := p.last; b != nil && b.tid == tid && b.fits(l, misc, pid) {
		b.addColumns(l, id, t, vals)
		return nil
	}
	return p.add(w, misc, l, id, pid, tid, t, vals)
}

// AddFields packs the sample Add would be given for an event added with
// id: thread pid/tid, time t, and the values of its format's fields after
// the common ones, each cut to its width (a recorder that knows its
// values saves building the sample).
func (p *Packer) AddFields(w *Writer, misc uint16, id uint64, pid, tid uint32, t uint64, vals []uint64) error {
	l := p.layout(id)
	if l == nil || len(vals) != len(l.sizes) {
		return fmt.Errorf("perfdata: packing sample id %#x with %d values: not an event added with as many fields", id, len(vals))
	}
	if b := p.last; b != nil && b.tid == tid && b.fits(l, misc, pid) {
		b.addColumns(l, id, t, vals)
		return nil
	}
	return p.add(w, misc, l, id, pid, tid, t, vals)
}

// fits reports whether a sample of l, pid and misc goes into the batch
// as it is (addColumns): it has samples of them, room for one more in
// every column l uses and the fields of l.
func (b *packBatch) fits(l *packedLayout, misc uint16, pid uint32) bool {
	return b.count > 0 && b.misc == misc && b.pid == pid && b.room > 0 && b.size <= MaxPackedBytes-packedMaxSample-packedMaxHead &&
		len(b.end) >= 2+len(l.sizes) && len(b.prev) >= l.base+len(l.sizes)
}

// add appends a sample to its thread's batch, writing the batch first
// when it is full or of another process.
func (p *Packer) add(w *Writer, misc uint16, l *packedLayout, id uint64, pid, tid uint32, t uint64, vals []uint64) error {
	b := p.last
	if b == nil || b.tid != tid {
		b = p.batches[tid]
		if b == nil {
			b = p.newBatch(tid)
		}
		p.last = b
	}
	if b.count > 0 && (b.misc != misc || b.pid != pid || len(b.data)+b.size > MaxPackedBytes-packedMaxSample-packedMaxHead) {
		if err := p.write(w, b); err != nil {
			return err
		}
	}
	if b.count == 0 {
		b.pid, b.misc, b.t, b.lastID, b.lastT = pid, misc, t, p.id, t
		if len(b.prev) < p.fields {
			b.prev = make([]uint64, p.fields)
		}
		clear(b.prev)
		if !b.listed {
			p.order = append(p.order, b)
			b.listed = true
		}
	}
	if need := l.base + len(l.sizes); len(b.prev) < need {
		// An event added while the batch was filling: its fields start
		// from 0, as the Reader's do.
		b.prev = append(b.prev, make([]uint64, need-len(b.prev))...)
	}
	if !p.rowLayout {
		if nc := 2 + len(l.sizes); b.room == 0 || len(b.end) < nc {
			b.makeRoom(nc)
		}
		b.addColumns(l, id, t, vals)
		return nil
	}
	// The batch has room for a whole sample (packedMaxSample): the
	// varints go in without a check of room each.
	if cap(b.data)-len(b.data) < packedMaxSample {
		b.data = slices.Grow(b.data, MaxPackedBytes)
	}
	d := b.data[len(b.data):cap(b.data)]
	n := putUvarint(d, zigzag(id-b.lastID))
	n += putUvarint(d[n:], zigzag(t-b.lastT))
	b.lastID, b.lastT = id, t
	prev := b.prev[l.base : l.base+len(l.sizes)]
	sizes, vals := l.sizes[:len(prev)], vals[:len(prev)]
	for k := range prev {
		v := vals[k]
		if sz := sizes[k]; sz < 8 {
			v &= 1<<(8*sz) - 1
		}
		n += putUvarint(d[n:], zigzag(v-prev[k]))
		prev[k] = v
	}
	b.data = b.data[:len(b.data)+n]
	b.count++
	return nil
}

// addColumns appends a sample's differences to b's columns: its id's to
// column 0, its time's to 1, its k-th field's to 2+k. The columns have
// room for the sample's varints (makeRoom: one check a sample, not one a
// varint).
func (b *packBatch) addColumns(l *packedLayout, id, t uint64, vals []uint64) {
	b.room--
	col, end := b.col, b.end[:2+len(l.sizes)]
	e0, e1 := end[0], end[1]
	end[0] = putColumn(col, e0, zigzag(id-b.lastID))
	// A time's difference takes two bytes more often than not: tens
	// to thousands of nanoseconds between a thread's calls.
	if d := zigzag(t - b.lastT); d >= 0x80 && d < 0x4000 {
		col[e1], col[e1+1] = byte(d)|0x80, byte(d>>7)
		end[1] = e1 + 2
	} else {
		end[1] = putColumn(col, e1, d)
	}
	n := end[0] - e0 + end[1] - e1
	b.lastID, b.lastT = id, t
	prev := b.prev[l.base : l.base+len(l.sizes)]
	sizes, vals, fe := l.sizes[:len(prev)], vals[:len(prev)], end[2:][:len(prev)]
	for k := range prev {
		v := vals[k]
		if sz := sizes[k]; sz < 8 {
			v &= 1<<(8*sz) - 1
		}
		e := fe[k]
		fe[k] = putColumn(col, e, zigzag(v-prev[k]))
		n += fe[k] - e
		prev[k] = v
	}
	b.size += n
	b.count++
}

// putColumn writes v as a varint at col[e:] and returns where it ends.
func putColumn(col []byte, e int, v uint64) int {
	if v < 0x80 {
		col[e] = byte(v)
		return e + 1
	}
	return e + putColumnVarint(col[e:], v)
}

// putColumnVarint is putColumn's varint of more than one byte, kept out
// of line so that putColumn is inlined.
//
//go:noinline
func putColumnVarint(d []byte, v uint64) int { return putUvarint(d, v) }

// packRoomMin is the fewest samples makeRoom leaves room for without
// growing the regions; packSpanMin is the smallest region.
const (
	packRoomMin = 16
	packSpanMin = 1024
)

// makeRoom readies b's columns for at least nc columns and sets room to
// how many samples (of at most 10 bytes a column) fit in every region,
// growing the regions when fewer than packRoomMin do.
func (b *packBatch) makeRoom(nc int) {
	nc = max(nc, len(b.end))
	free := b.span
	for k, e := range b.end {
		free = min(free, (k+1)*b.span-e)
	}
	if nc == len(b.end) && free >= 10*packRoomMin {
		b.room = free / 10
		return
	}
	span := b.span
	if free < 10*packRoomMin {
		span = max(2*span, packSpanMin)
	}
	col := make([]byte, nc*span)
	end := make([]int, nc)
	for k := range end {
		end[k] = k * span
		if k < len(b.end) {
			end[k] += copy(col[k*span:], b.col[k*b.span:b.end[k]])
		}
	}
	b.col, b.end, b.span = col, end, span
	b.makeRoom(nc)
}

// putUvarint is binary.PutUvarint with the one- and two-byte cases, most
// of a packed sample's differences, first and inlined.
func putUvarint(d []byte, v uint64) int {
	if v < 0x80 {
		d[0] = byte(v)
		return 1
	}
	if v < 0x4000 {
		_ = d[1]
		d[0], d[1] = byte(v)|0x80, byte(v>>7)
		return 2
	}
	return binary.PutUvarint(d, v)
}

// packedMaxFields bounds the fields of a packable event, packedMaxSample
// what one sample adds to a batch: an id, a time and the fields as varints
// of at most 10 bytes.
const (
	packedMaxFields = 256
	packedMaxSample = 10 * (2 + packedMaxFields)
	// packedMaxHead bounds the column layout's lengths: a varint of at
	// most 3 bytes (a length under MaxPackedBytes) for each column.
	packedMaxHead = 3 * (2 + packedMaxFields)
)

// Fields returns how many fields a sample of the event added with id
// packs (AddFields' values), or -1 when it was not added or cannot be
// packed.
func (p *Packer) Fields(id uint64) int {
	if l := p.layout(id); l != nil {
		return len(l.sizes)
	}
	return -1
}

// layout returns the layout of the event added with id, or nil.
func (p *Packer) layout(id uint64) *packedLayout {
	if i := id - p.lo; i < uint64(len(p.dense)) {
		return p.dense[i]
	}
	return nil
}

// fit returns the layout a sample body is packed by; nil: it cannot be.
func (p *Packer) fit(body []byte) *packedLayout {
	if len(body) < packedHead+8 {
		return nil
	}
	l := p.layout(binary.LittleEndian.Uint64(body))
	if l == nil || len(body) != packedHead+l.raw || binary.LittleEndian.Uint32(body[24:]) != uint32(l.raw) {
		return nil
	}
	raw := body[packedHead:]
	if binary.LittleEndian.Uint16(raw) != l.typ || raw[2] != 0 || raw[3] != 0 || binary.LittleEndian.Uint32(raw[4:]) != binary.LittleEndian.Uint32(body[12:]) {
		return nil
	}
	for _, c := range raw[l.fields:] {
		if c != 0 {
			return nil
		}
	}
	return l
}

// Flush writes every thread's batch.
func (p *Packer) Flush(w *Writer) error {
	if len(p.batches) > len(p.order) {
		p.dropIdle()
	}
	for _, b := range p.order {
		if err := p.write(w, b); err != nil {
			return err
		}
		b.listed = false
	}
	p.order = p.order[:0]
	return nil
}

// newBatch returns an empty batch for tid, a free one if there is one.
func (p *Packer) newBatch(tid uint32) *packBatch {
	b := &packBatch{}
	if n := len(p.free); n > 0 {
		b, p.free = p.free[n-1], p.free[:n-1]
	}
	b.tid = tid
	p.batches[tid] = b
	return b
}

// dropIdle drops the batches of threads without samples since the last
// Flush (empty: it wrote them).
func (p *Packer) dropIdle() {
	for tid, b := range p.batches {
		if b.listed {
			continue
		}
		delete(p.batches, tid)
		if len(p.free) < packFreeBatches {
			p.free = append(p.free, b)
		}
	}
	p.last = nil
}

// write writes b as one packed sample and empties it.
func (p *Packer) write(w *Writer, b *packBatch) error {
	if b.count == 0 {
		return nil
	}
	le := binary.LittleEndian
	at, data := packedDataAt, len(b.data)
	ncols := 0
	if !p.rowLayout {
		// The columns the batch's samples used (the others are empty).
		ncols = len(b.end)
		for ncols > 2 && b.end[ncols-1] == (ncols-1)*b.span {
			ncols--
		}
		h := p.head[:0]
		for k, e := range b.end[:ncols] {
			h = binary.AppendUvarint(h, uint64(e-k*b.span))
		}
		p.head = h
		at, data = packedColDataAt, len(h)+b.size
	}
	raw := at + data
	raw = (4+raw+7)&^7 - 4
	n := 8 + packedHead + raw
	rec := w.RecordBuffer(n)[:n]
	clear(rec)
	le.PutUint64(rec[8:], p.id)
	le.PutUint32(rec[16:], b.pid)
	le.PutUint32(rec[20:], b.tid)
	le.PutUint64(rec[24:], b.t)
	le.PutUint32(rec[32:], uint32(raw))
	pl := rec[8+packedHead:]
	le.PutUint16(pl, p.typ)
	le.PutUint32(pl[4:], b.tid)
	le.PutUint32(pl[packedCountAt:], b.count)
	le.PutUint32(pl[packedLocAt:], uint32(data)<<16|uint32(at))
	if p.rowLayout {
		copy(pl[at:], b.data)
	} else {
		le.PutUint32(pl[packedColumnsAt:], uint32(ncols))
		at += copy(pl[at:], p.head)
		for k, e := range b.end[:ncols] {
			at += copy(pl[at:], b.col[k*b.span:e])
		}
		for k := range b.end {
			b.end[k] = k * b.span
		}
		b.room = b.span / 10
	}
	b.count, b.data, b.size = 0, b.data[:0], 0
	p.written++
	return w.CommitRecord(uint32(RecordSample), b.misc, rec)
}

// PackedFormat is the tracefs-style format of schema.PackedEvent with
// tracepoint id id, as the file's tracing data describes it: the column
// layout (its columns field).
func PackedFormat(id uint64) []byte {
	return packedFormat(id, fmt.Sprintf("\tfield:u32 columns;\toffset:%d;\tsize:4;\tsigned:0;\n", packedColumnsAt))
}

// packedRowFormat is PackedFormat of the row layout, without the columns
// field.
func packedRowFormat(id uint64) []byte { return packedFormat(id, "") }

func packedFormat(id uint64, columns string) []byte {
	return fmt.Appendf(nil, "name: %s\nID: %d\nformat:\n"+schema.CommonFieldsFormat+
		"\tfield:u32 count;\toffset:%d;\tsize:4;\tsigned:0;\n"+
		"\tfield:__data_loc u8[] samples;\toffset:%d;\tsize:4;\tsigned:0;\n"+
		"%s\n"+
		"print fmt: \"count=%%u\", REC->count\n", schema.PackedEvent, id, packedCountAt, packedLocAt, columns)
}
