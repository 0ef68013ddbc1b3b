package perfdata

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/faultline/faultline/perfdata/schema"
)

// Stack deltas (schema.StackDeltaEvent). Consecutive stack samples of a
// thread copy the same stack up to the same top, and the frames above the
// newer one's caller are mostly unchanged: a stack-delta sample holds a
// sample with the parts it shares with the previous sample its thread's
// stack-delta samples stood for left out (copies: where each goes, where
// in the previous sample it comes from, how long it is), and the Reader
// puts them back, byte for byte. StackDeltas writes them.

// The stack-delta event's raw payload: the common fields, the count of
// copies, their __data_loc word, the sample's __data_loc word, then the
// copies (each u32 at, from, n) and the sample's bytes.
const (
	deltaCountAt  = 8
	deltaCopiesAt = 12
	deltaLocAt    = 16
	deltaDataAt   = 20
)

// A copy left out of a stack-delta sample is at least deltaMinRun bytes
// (more than its 12 bytes of at, from, n); a sample has at most
// deltaMaxCopies.
const (
	deltaMinRun    = 32
	deltaMaxCopies = 1024
)

// stackDeltaThreads bounds the threads whose previous sample the writer
// and the Reader keep: a sample of one more thread makes both forget all
// of them, so neither holds more than this many samples of at most 64 KiB.
const stackDeltaThreads = 64

// isStackDeltaEvent reports whether ev is schema.StackDeltaEvent with the
// layout this package reads.
func isStackDeltaEvent(ev *Event) bool {
	f := ev.Format
	if f == nil || f.System != schema.System || f.Name != schema.StackDeltaEvent || ev.Attr.SampleType != packedType {
		return false
	}
	n, c, d := f.Field("count"), f.Field("copies"), f.Field("sample")
	return n != nil && n.Offset == deltaCountAt && n.Size == 4 && c != nil && c.Dynamic && c.Offset == deltaCopiesAt &&
		d != nil && d.Dynamic && d.Offset == deltaLocAt
}

// deltaPrev is one thread's previous sample, as the Reader rebuilt it
// (the writer's copy is the sample it was given).
type deltaPrev struct {
	body   []byte
	lo, hi int    // the span shared parts are found in (writer)
	top    uint64 // the address the span ends at (writer)
}

// deltaState holds the previous sample of each thread, forgetting them
// all at a sample of one thread too many.
type deltaState struct {
	prev map[uint32]*deltaPrev
	free []*deltaPrev
}

// of returns tid's previous sample, made empty when tid has none.
func (s *deltaState) of(tid uint32) *deltaPrev {
	if p := s.prev[tid]; p != nil {
		return p
	}
	if s.prev == nil {
		s.prev = map[uint32]*deltaPrev{}
	}
	if len(s.prev) >= stackDeltaThreads {
		for _, p := range s.prev {
			p.body = p.body[:0]
			s.free = append(s.free, p)
		}
		clear(s.prev)
	}
	var p *deltaPrev
	if n := len(s.free); n > 0 {
		p, s.free = s.free[n-1], s.free[:n-1]
	} else {
		p = &deltaPrev{}
	}
	s.prev[tid] = p
	return p
}

// expandStackDelta queues (or, in file order, readies) the sample a
// stack-delta sample stands for. One whose bytes do not fit yields a
// warning, and its thread's next samples, which would need it, warnings
// too.
func (r *Reader) expandStackDelta(ev *Event, rec rawRec) {
	body, raw, ok := r.beginExpand(ev, rec, deltaDataAt, "stack-delta")
	if !ok {
		return
	}
	misc := r.bo.Uint16(rec.data[4:])
	tid := r.bo.Uint32(body[12:])
	count := int(r.bo.Uint32(raw[deltaCountAt:]))
	cloc, dloc := r.bo.Uint32(raw[deltaCopiesAt:]), r.bo.Uint32(raw[deltaLocAt:])
	coff, cn := int(cloc&0xffff), int(cloc>>16)
	off, dn := int(dloc&0xffff), int(dloc>>16)
	prev := r.deltas.of(tid)
	bad := func(msg string) {
		r.warn(&FormatError{Offset: rec.off, Msg: "stack-delta sample's " + msg, Err: errPacked})
		prev.body = prev.body[:0]
	}
	if coff+cn > len(raw) || off+dn > len(raw) || cn != 12*count {
		bad(fmt.Sprintf("%d copies at %d+%d and %d bytes at %d do not fit its %d-byte payload", count, coff, cn, dn, off, len(raw)))
		return
	}
	copies, d := raw[coff:coff+cn], raw[off:off+dn]
	size := 8 + dn
	for i := 0; i < count; i++ {
		size += int(r.bo.Uint32(copies[12*i+8:]))
	}
	if size > 0xffff || size < 8+packedHead {
		bad(fmt.Sprintf("sample of %d bytes", size))
		return
	}
	out, ch := r.src.arena.alloc(size)
	r.bo.PutUint32(out, uint32(RecordSample))
	r.bo.PutUint16(out[4:], misc)
	r.bo.PutUint16(out[6:], uint16(size))
	w, pos := 8, 0
	for i := 0; i < count; i++ {
		c := copies[12*i:]
		at, from, n := int(r.bo.Uint32(c)), int(r.bo.Uint32(c[4:])), int(r.bo.Uint32(c[8:]))
		k := 8 + at - w // literal bytes before the copy
		if at < w-8 || pos+k > dn || from > len(prev.body) || n > len(prev.body)-from {
			r.src.arena.release(ch)
			bad(fmt.Sprintf("copy %d of %d (%d bytes from %d of thread %d's previous %d-byte sample to %d) does not fit", i, count, n, from, tid, len(prev.body), at))
			return
		}
		w += copy(out[w:], d[pos:pos+k])
		pos += k
		w += copy(out[w:], prev.body[from:from+n])
	}
	copy(out[w:], d[pos:])
	prev.body = append(prev.body[:0], out[8:]...)
	x := rawRec{data: out, off: rec.off, ch: ch}
	r.stats.Unpacked++
	t, ok := r.recordTime(out)
	if ok && r.opts.Order == TimeOrder {
		r.queue(t, x)
		return
	}
	r.q.ready = append(r.q.ready, qent{time: t, rec: x})
}

// StackDeltas writes samples that end in a copy of a thread's stack as
// stack-delta samples of schema.StackDeltaEvent: the part of the copy at
// its top that equals the previous sample's of the same thread, at the
// same addresses, is left out. The Reader gives back exactly the sample
// Add was given. A StackDeltas allocates nothing once it has seen its
// threads' largest samples.
type StackDeltas struct {
	id      uint64 // the stack-delta event's sample id
	typ     uint16 // its tracepoint id
	state   deltaState
	written uint64
	copies  []deltaCopy // Add's
	spare   []byte      // Buffer's
}

// deltaCopy is a part of a sample left out: n bytes at offset at, equal
// to the previous sample's at offset from.
type deltaCopy struct{ at, from, n uint32 }

// appendCopies appends the parts of a (a stack copy) equal to b's bytes
// at the same addresses, both ending at the same address: runs of whole
// words, counted from the end, of at least deltaMinRun bytes, from the
// top down, offsets relative to a's end (at = len(a) - distance from
// the end - n, made relative to the sample by the caller).
func appendCopies(cs []deltaCopy, a, b []byte) []deltaCopy {
	le := binary.LittleEndian
	k := min(len(a), len(b))
	eq := func(i int) bool { return le.Uint64(a[len(a)-i-8:]) == le.Uint64(b[len(b)-i-8:]) }
	for i := 0; i+8 <= k && len(cs) < deltaMaxCopies; {
		j := i
		// Whole blocks first (bytes.Equal compares them many bytes at a
		// time), then words.
		for j+64 <= k && bytes.Equal(a[len(a)-j-64:len(a)-j], b[len(b)-j-64:len(b)-j]) {
			j += 64
		}
		for j+8 <= k && eq(j) {
			j += 8
		}
		if j-i >= deltaMinRun {
			cs = append(cs, deltaCopy{at: uint32(len(a) - j), from: uint32(len(b) - j), n: uint32(j - i)})
		}
		i = j
		for i+8 <= k && !eq(i) {
			i += 8
		}
	}
	return cs
}

// appendHeadCopies appends the parts of a equal to b's bytes at the same
// offsets, both from their start: runs of whole words of at least
// deltaMinRun bytes, from the end of the common length down (the order
// appendCopies gives, continued). A stack sample's fields before its stack
// copy (the call's arguments, its top-of-stack words, the registers) are
// mostly its thread's previous sample's.
func appendHeadCopies(cs []deltaCopy, a, b []byte) []deltaCopy {
	le := binary.LittleEndian
	k := min(len(a), len(b)) &^ 7
	start := len(cs)
	for i := 0; i < k && len(cs) < deltaMaxCopies; {
		j := i
		// Whole blocks first (bytes.Equal compares them many bytes at a
		// time), then words.
		for j+64 <= k && bytes.Equal(a[j:j+64], b[j:j+64]) {
			j += 64
		}
		for j < k && le.Uint64(a[j:]) == le.Uint64(b[j:]) {
			j += 8
		}
		if j-i >= deltaMinRun {
			cs = append(cs, deltaCopy{at: uint32(i), from: uint32(i), n: uint32(j - i)})
		}
		for i = j; i < k && le.Uint64(a[i:]) != le.Uint64(b[i:]); i += 8 {
		}
	}
	slices.Reverse(cs[start:])
	return cs
}

// NewStackDeltas returns a StackDeltas that writes samples of the
// stack-delta event with sample id id and tracepoint id typ.
func NewStackDeltas(id uint64, typ uint16) *StackDeltas {
	return &StackDeltas{id: id, typ: typ}
}

// Written returns the stack-delta samples written so far.
func (s *StackDeltas) Written() uint64 { return s.written }

// Add writes a sample's body (the record after its 8-byte header, misc
// being the header's; its IDENTIFIER, TID and TIME first) whose bytes
// [lo, hi) are a copy of the thread's memory ending at address top (the
// stack's top). Where the previous sample of the thread (given to Add)
// had a span ending at the same address, the runs of at least deltaMinRun
// bytes at the same addresses that equal its bytes are left out; a body a
// stack-delta sample would not hold is written as it is.
func (s *StackDeltas) Add(w *Writer, misc uint16, body []byte, lo, hi int, top uint64) error {
	return s.add(w, misc, body, lo, hi, top, false)
}

// Buffer returns an empty buffer to build a body in for AddOwn.
func (s *StackDeltas) Buffer() []byte { return s.spare[:0] }

// AddOwn is Add of a body built by appending to Buffer's buffer, which
// then belongs to s: it becomes the thread's previous sample instead of
// being copied, and the caller takes its next buffer from Buffer.
func (s *StackDeltas) AddOwn(w *Writer, misc uint16, body []byte, lo, hi int, top uint64) error {
	return s.add(w, misc, body, lo, hi, top, true)
}

func (s *StackDeltas) add(w *Writer, misc uint16, body []byte, lo, hi int, top uint64, own bool) error {
	le := binary.LittleEndian
	if len(body) < packedHead || lo < 0 || lo > hi || hi > len(body) || 8+packedHead+(4+deltaDataAt+len(body)+7)&^7-4 > 0xffff {
		if own {
			s.spare = body[:0]
		}
		return w.WriteRecordParts(uint32(RecordSample), misc, body)
	}
	pid, tid := le.Uint32(body[8:]), le.Uint32(body[12:])
	prev := s.state.of(tid)
	cs := s.copies[:0]
	if len(prev.body) > 0 && prev.top == top {
		cs = appendCopies(cs, body[lo:hi], prev.body[prev.lo:prev.hi])
		for i := range cs {
			cs[i].at += uint32(lo)
			cs[i].from += uint32(prev.lo)
		}
	}
	if len(prev.body) > 0 && prev.lo == lo {
		cs = appendHeadCopies(cs, body[:lo], prev.body[:lo])
	}
	s.copies = cs
	dn := len(body)
	for _, c := range cs {
		dn -= int(c.n)
	}
	raw := (4+deltaDataAt+12*len(cs)+dn+7)&^7 - 4
	size := 8 + packedHead + raw
	rec := w.RecordBuffer(size)[:size]
	le.PutUint64(rec[8:], s.id)
	le.PutUint32(rec[16:], pid)
	le.PutUint32(rec[20:], tid)
	copy(rec[24:32], body[16:24])
	le.PutUint32(rec[32:], uint32(raw))
	pl := rec[8+packedHead:]
	le.PutUint16(pl, s.typ)
	pl[2], pl[3] = 0, 0
	le.PutUint32(pl[4:], tid)
	le.PutUint32(pl[deltaCountAt:], uint32(len(cs)))
	le.PutUint32(pl[deltaCopiesAt:], uint32(12*len(cs))<<16|deltaDataAt)
	le.PutUint32(pl[deltaLocAt:], uint32(dn)<<16|uint32(deltaDataAt+12*len(cs)))
	at := deltaDataAt
	pos := 0 // in body
	d := pl[deltaDataAt+12*len(cs):]
	k := 0                              // in d
	for i := len(cs) - 1; i >= 0; i-- { // ascending offsets
		c := cs[i]
		le.PutUint32(pl[at:], c.at)
		le.PutUint32(pl[at+4:], c.from)
		le.PutUint32(pl[at+8:], c.n)
		at += 12
		k += copy(d[k:], body[pos:c.at])
		pos = int(c.at + c.n)
	}
	k += copy(d[k:], body[pos:])
	clear(d[k:])
	if own {
		prev.body, s.spare = body, prev.body[:0]
	} else {
		prev.body = append(prev.body[:0], body...)
	}
	prev.lo, prev.hi, prev.top = lo, hi, top
	s.written++
	return w.CommitRecord(uint32(RecordSample), misc, rec)
}

// StackDeltaFormat is the tracefs-style format of schema.StackDeltaEvent
// with tracepoint id id, as the file's tracing data describes it.
func StackDeltaFormat(id uint64) []byte {
	return fmt.Appendf(nil, "name: %s\nID: %d\nformat:\n"+schema.CommonFieldsFormat+
		"\tfield:u32 count;\toffset:%d;\tsize:4;\tsigned:0;\n"+
		"\tfield:__data_loc u32[] copies;\toffset:%d;\tsize:4;\tsigned:0;\n"+
		"\tfield:__data_loc u8[] sample;\toffset:%d;\tsize:4;\tsigned:0;\n\n"+
		"print fmt: \"copies=%%u\", REC->count\n",
		schema.StackDeltaEvent, id, deltaCountAt, deltaCopiesAt, deltaLocAt)
}
