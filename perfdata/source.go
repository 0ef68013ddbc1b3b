package perfdata

import (
	"errors"
	"fmt"
	"io"
)

// rawRec is one undecoded record: header and body, plus for AUXTRACE and
// pipe-mode HEADER_TRACING_DATA the bytes that follow it in the stream.
type rawRec struct {
	data  []byte
	extra []byte
	off   int64
	ch    *chunk // arena chunk holding data, nil for the file mapping
}

// chunk is a block of an arena; refs counts the records pointing into it
// that have not been delivered and released yet.
type chunk struct {
	b    []byte
	refs int
}

// Arena chunks start small (most pipes are small) and double up to
// maxChunkSize.
const (
	minChunkSize = 128 << 10
	maxChunkSize = 4 << 20
)

// maxFreeBytes bounds the chunks an arena keeps for reuse: a burst (a
// stream's reader that fell behind, then a large round) is left to the
// garbage collector once it has passed, so a stream read for hours holds
// what its steady state needs, not its largest burst.
const maxFreeBytes = 16 << 20

// arena hands out record buffers for input that is not memory mapped (pipes,
// decompressed data). A chunk returns to the free list when every record in
// it has been delivered, so in steady state decoding allocates nothing.
type arena struct {
	cur       *chunk
	free      []*chunk
	nextChunk int
	live      int64 // bytes of chunks holding records not yet released
	freeBytes int64 // bytes of the chunks in free
}

func (a *arena) alloc(n int) ([]byte, *chunk) {
	c := a.cur
	if c != nil && c.refs == 0 {
		c.b = c.b[:0]
	}
	if c == nil || cap(c.b)-len(c.b) < n {
		if c != nil && c.refs == 0 && a.freeBytes+int64(cap(c.b)) <= maxFreeBytes {
			a.free = append(a.free, c)
			a.freeBytes += int64(cap(c.b))
		}
		c = nil
		for i, f := range a.free {
			if cap(f.b) >= n {
				c = f
				a.free[i] = a.free[len(a.free)-1]
				a.free = a.free[:len(a.free)-1]
				a.freeBytes -= int64(cap(f.b))
				break
			}
		}
		if c == nil {
			a.nextChunk = min(max(a.nextChunk*2, minChunkSize), maxChunkSize)
			c = &chunk{b: make([]byte, 0, max(n, a.nextChunk))}
		}
		a.cur = c
	}
	l := len(c.b)
	c.b = c.b[:l+n]
	c.refs++
	if c.refs == 1 {
		a.live += int64(cap(c.b))
	}
	return c.b[l : l+n : l+n], c
}

func (a *arena) release(c *chunk) {
	c.refs--
	if c.refs == 0 {
		a.live -= int64(cap(c.b))
	}
	if c.refs == 0 && c != a.cur && a.freeBytes+int64(cap(c.b)) <= maxFreeBytes {
		c.b = c.b[:0]
		a.free = append(a.free, c)
		a.freeBytes += int64(cap(c.b))
	}
}

// source produces raw records from the data section: from memory (a file
// mapping) or from a stream, with COMPRESSED records expanded in place.
type source struct {
	r *Reader

	mem     []byte // memory mode: the bytes holding the records
	memBase int64  // file offset of mem[0]
	memPos  int
	res     residency

	sr        io.Reader // stream mode
	streamPos int64     // file offset of the next byte of sr
	hdr       [16]byte
	scratch   []byte // compressed payloads read from a stream

	arena arena

	z    zstdStream
	dbuf []byte // decompressed bytes not yet cut into records
	dpos int
	dOff int64 // offset of the COMPRESSED record the data at dpos came from
	eof  bool

	// inflated is the work compressed records have made so far: the bytes
	// decompressed, plus recordCharge for each record cut from them;
	// deflated, the compressed bytes they came from.
	inflated, deflated int64
	maxInflated        int64
	maxRatio           int64 // Options.MaxInflateRatio
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// next returns the next record, or ok=false at the end of input or on an
// error (recorded in r.err) or truncation (recorded as a warning).
func (s *source) next() (rawRec, bool) {
	for {
		if rec, ok := s.nextDecompressed(); ok {
			return rec, true
		}
		if s.r.err != nil || s.eof {
			return rawRec{}, false
		}
		var rec rawRec
		var ok bool
		if s.sr != nil {
			rec, ok = s.nextStream()
		} else {
			rec, ok = s.nextMem()
		}
		if !ok {
			s.eof = true
			if len(s.dbuf)-s.dpos > 0 {
				s.r.warn(&FormatError{Offset: s.dOff, Msg: fmt.Sprintf("compressed data ends inside a record (%d bytes left over)", len(s.dbuf)-s.dpos), Truncated: true})
			}
			return rawRec{}, false
		}
		typ := RecordType(s.r.bo.Uint32(rec.data))
		if typ != RecordCompressed && typ != RecordCompressed2 {
			return rec, true
		}
		s.r.stats.Compressed++
		payload := rec.data[8:]
		if typ == RecordCompressed2 {
			// data_size, not header.size, bounds the payload (see nextMem).
			ds := s.r.bo.Uint64(rec.data[8:])
			payload = rec.data[16:]
			if ds < uint64(len(payload)) {
				payload = payload[:ds]
			}
		}
		if err := s.decompress(payload, rec.off); err != nil {
			s.r.fail(err)
			return rawRec{}, false
		}
		if rec.ch != nil {
			s.arena.release(rec.ch)
		}
	}
}

func (s *source) decompress(payload []byte, off int64) error {
	if s.dpos > 0 {
		n := copy(s.dbuf, s.dbuf[s.dpos:])
		s.dbuf = s.dbuf[:n]
		s.dpos = 0
	}
	s.dOff = off
	var err error
	had := len(s.dbuf)
	// One record may add maxDecompressed bytes, and never more than the
	// file's budget has left.
	limit := int64(maxDecompressed)
	budget := s.maxInflated - s.inflated
	if budget < limit {
		limit = max(budget, 0)
	}
	// Nor more than the inflate ratio allows with this record's bytes.
	ratioBudget := max(inflateFloor, s.maxRatio*(s.deflated+int64(len(payload)))) - s.inflated
	byRatio := ratioBudget < limit
	if byRatio {
		limit = max(ratioBudget, 0)
	}
	s.dbuf, err = s.z.feed(payload, s.dbuf, int(limit)+len(s.dbuf))
	if errors.Is(err, errDecompressedTooBig) && byRatio {
		s.deflated += int64(len(payload))
		s.inflated = max(inflateFloor, s.maxRatio*s.deflated) + 1
		return s.checkInflated(off)
	}
	if errors.Is(err, errDecompressedTooBig) && limit == budget {
		s.inflated = s.maxInflated + 1
		return s.checkInflated(off)
	}
	if err != nil {
		return zstdError(off, err)
	}
	s.inflated += int64(len(s.dbuf) - had)
	s.deflated += int64(len(payload))
	return s.checkInflated(off)
}

// maxRatio bounds how much work compressed records may make, per
// compressed byte, once they have made more than inflateFloor: work is
// what they inflate to plus recordCharge per record, since reading a
// record (and analyzing a sample) costs about as much as 256 of its
// bytes, however small it is.
// perf's zstd shrinks DWARF-stack recordings about 100×, faultline
// record's about 50×; a file of no content whose small records expand
// ten thousand times (a GiB of FINISHED_ROUND from 90 KB) is a bomb, and
// bounded so, reading costs a bounded time per byte of input.
const (
	inflateFloor = 4 << 20
	recordCharge = 256
)

func (s *source) checkInflated(off int64) error {
	switch {
	case s.inflated > s.maxInflated:
		return &FormatError{Offset: off, Msg: fmt.Sprintf("compressed records expand to more than %d MiB in all, the limit for one input; split the recording (perf record --switch-output) or record without -z", s.maxInflated>>20)}
	case s.inflated > inflateFloor && s.inflated/s.maxRatio > s.deflated:
		return &FormatError{Offset: off, Msg: fmt.Sprintf("compressed records expand %d× (%d bytes to %d MiB of records so far, counting %d bytes a record), more than the %d× perf's zstd output can reach: the file is corrupt or crafted", s.inflated/max(s.deflated, 1), s.deflated, s.inflated>>20, recordCharge, s.maxRatio)}
	}
	return nil
}

// nextDecompressed cuts the next whole record out of the decompressed data
// and copies it into the arena (the decompression buffer is reused).
func (s *source) nextDecompressed() (rawRec, bool) {
	p := s.dbuf[s.dpos:]
	if len(p) < 8 {
		return rawRec{}, false
	}
	size := int(s.r.bo.Uint16(p[6:]))
	if size < 8 {
		s.r.fail(&FormatError{Offset: s.dOff, Msg: fmt.Sprintf("record of size %d inside the COMPRESSED record: corrupt compressed data", size)})
		s.dbuf, s.dpos = s.dbuf[:0], 0
		return rawRec{}, false
	}
	if size > len(p) {
		return rawRec{}, false // continues in the next COMPRESSED record
	}
	if s.inflated += recordCharge; s.inflated > inflateFloor && s.inflated/s.maxRatio > s.deflated {
		s.r.fail(s.checkInflated(s.dOff))
		s.dbuf, s.dpos = s.dbuf[:0], 0
		return rawRec{}, false
	}
	b, ch := s.arena.alloc(size)
	copy(b, p[:size])
	s.dpos += size
	if s.dpos == len(s.dbuf) {
		s.dbuf, s.dpos = s.dbuf[:0], 0
	}
	return rawRec{data: b, off: s.dOff, ch: ch}, true
}

func (s *source) truncated(at int64, need uint64, have int64, what string) {
	s.r.warn(&FormatError{Offset: at, Msg: fmt.Sprintf("data truncated: %s of %d bytes at 0x%x runs past the end of the input (%d bytes left)", what, need, at, have), Truncated: true})
	s.r.meta.Truncated = true
}

func (s *source) nextMem() (rawRec, bool) {
	// Next reads a whole round ahead before it delivers: drop here too.
	s.res.maybeDrop()
	p := s.mem[s.memPos:]
	off := s.memBase + int64(s.memPos)
	if len(p) == 0 {
		return rawRec{}, false
	}
	if len(p) < 8 {
		s.truncated(off, 8, int64(len(p)), "record header")
		return rawRec{}, false
	}
	bo := s.r.bo
	typ := RecordType(bo.Uint32(p))
	size := uint64(bo.Uint16(p[6:]))
	if typ == RecordCompressed2 && len(p) >= 16 {
		// perf 6.16+ can overflow the u16 header.size of COMPRESSED2
		// (KDAB/hotspot#736); then the record is exactly 16+data_size
		// bytes with no padding. Trust data_size.
		ds := bo.Uint64(p[8:])
		if ds <= uint64(len(p)) && align8(16+ds) > size {
			size = 16 + ds
		}
	}
	if size < 8 || typ == RecordCompressed2 && size < 16 {
		s.r.fail(&FormatError{Offset: off, Msg: fmt.Sprintf("record header says size %d (type %d): corrupt file, the record length cannot be known", size, typ)})
		return rawRec{}, false
	}
	if size > uint64(len(p)) {
		s.truncated(off, size, int64(len(p)), typ.String()+" record")
		return rawRec{}, false
	}
	rec := rawRec{data: p[:size:size], off: off}
	adv := size
	if n, ok := s.extraLen(typ, rec.data); ok {
		if n > uint64(len(p))-size {
			s.truncated(off, size+n, int64(len(p)), typ.String()+" record with its data")
			return rawRec{}, false
		}
		rec.extra = p[size : size+n : size+n]
		adv += n
	}
	s.memPos += int(adv)
	s.res.touch(off, int(adv))
	return rec, true
}

// extraLen returns the length of data that follows a record outside its
// header.size: AUXTRACE's trace data and, in pipe mode, the tracing data of
// HEADER_TRACING_DATA (perf reads both straight from the file).
func (s *source) extraLen(typ RecordType, data []byte) (uint64, bool) {
	switch typ {
	case RecordAuxtrace:
		if len(data) >= 16 {
			return s.r.bo.Uint64(data[8:]), true
		}
	case RecordHeaderTracing:
		if len(data) >= 12 {
			return align8(uint64(s.r.bo.Uint32(data[8:]))), true
		}
	}
	return 0, false
}

func (s *source) nextStream() (rawRec, bool) {
	off := s.streamPos
	n, err := io.ReadFull(s.sr, s.hdr[:8])
	s.streamPos += int64(n)
	if err == io.EOF {
		return rawRec{}, false
	}
	if err != nil {
		if err == io.ErrUnexpectedEOF {
			s.truncated(off, 8, int64(n), "record header")
		} else {
			s.r.fail(&FormatError{Offset: off, Msg: "reading record header", Err: err})
		}
		return rawRec{}, false
	}
	bo := s.r.bo
	typ := RecordType(bo.Uint32(s.hdr[:]))
	size := uint64(bo.Uint16(s.hdr[6:]))
	if typ == RecordCompressed || typ == RecordCompressed2 {
		return s.streamCompressed(off, typ, size)
	}
	if size < 8 {
		s.r.fail(&FormatError{Offset: off, Msg: fmt.Sprintf("record header says size %d (type %d): corrupt file, the record length cannot be known", size, typ)})
		return rawRec{}, false
	}
	b, ch := s.arena.alloc(int(size))
	copy(b, s.hdr[:8])
	n, err = io.ReadFull(s.sr, b[8:])
	s.streamPos += int64(n)
	if err != nil {
		s.arena.release(ch)
		s.streamErr(off, size, int64(8+n), err, typ.String()+" record")
		return rawRec{}, false
	}
	rec := rawRec{data: b, off: off, ch: ch}
	if xn, ok := s.extraLen(typ, b); ok {
		extra, err := s.readExtra(xn)
		if err != nil {
			s.arena.release(ch)
			s.streamErr(off, size+xn, int64(size)+int64(len(extra)), err, typ.String()+" record with its data")
			return rawRec{}, false
		}
		rec.extra = extra
	}
	return rec, true
}

func (s *source) streamErr(off int64, need uint64, have int64, err error, what string) {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		s.truncated(off, need, have, what)
		return
	}
	s.r.fail(&FormatError{Offset: off, Msg: "reading " + what, Err: err})
}

// readExtra reads n bytes that follow a record, in chunks so that a corrupt
// length cannot make us allocate more than the stream really holds.
func (s *source) readExtra(n uint64) ([]byte, error) {
	var out []byte
	const step = 1 << 20
	for uint64(len(out)) < n {
		k := min(n-uint64(len(out)), step)
		if uint64(len(out))+k > maxFeatureSize {
			// Too large to keep (AUXTRACE data can be huge): skip it.
			m, err := io.CopyN(io.Discard, s.sr, int64(n-uint64(len(out))))
			s.streamPos += m
			if err != nil {
				return out, err
			}
			return nil, nil
		}
		l := len(out)
		out = append(out, make([]byte, k)...)
		m, err := io.ReadFull(s.sr, out[l:])
		s.streamPos += int64(m)
		if err != nil {
			return out[:l+m], err
		}
	}
	return out, nil
}

// streamCompressed reads a COMPRESSED(2) record's payload into scratch and
// returns it as a record for next to expand.
func (s *source) streamCompressed(off int64, typ RecordType, size uint64) (rawRec, bool) {
	bo := s.r.bo
	hl := uint64(8)
	if typ == RecordCompressed2 {
		n, err := io.ReadFull(s.sr, s.hdr[8:16])
		s.streamPos += int64(n)
		if err != nil {
			s.streamErr(off, 16, int64(8+n), err, "COMPRESSED2 record")
			return rawRec{}, false
		}
		hl = 16
		ds := bo.Uint64(s.hdr[8:])
		if align8(16+ds) > size {
			size = 16 + ds // overflowed header.size: see nextMem
		}
		if ds > maxDecompressed {
			s.r.fail(&FormatError{Offset: off, Msg: fmt.Sprintf("COMPRESSED2 record claims %d bytes of data: corrupt file", ds)})
			return rawRec{}, false
		}
	}
	if size < hl {
		s.r.fail(&FormatError{Offset: off, Msg: fmt.Sprintf("record header says size %d (type %d): corrupt file, the record length cannot be known", size, typ)})
		return rawRec{}, false
	}
	if uint64(cap(s.scratch)) < size {
		s.scratch = make([]byte, size)
	}
	b := s.scratch[:size]
	copy(b, s.hdr[:hl])
	n, err := io.ReadFull(s.sr, b[hl:])
	s.streamPos += int64(n)
	if err != nil {
		s.streamErr(off, size, int64(hl)+int64(n), err, typ.String()+" record")
		return rawRec{}, false
	}
	return rawRec{data: b, off: off}, true
}
