package perfdata

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// A test-only perf.data encoder, so the decoder is tested without perf. It
// writes what tools/perf/util/header.c and the kernel write, as the layouts
// in format.go describe them.

type synthEvent struct {
	attr Attr
	ids  []uint64
	name string
}

type synth struct {
	bo       binary.ByteOrder
	events   []synthEvent
	data     bytes.Buffer // encoded records
	features map[Feature][]byte
	attrSize int // sizeof(perf_event_attr) to write; default 136 (VER8)
}

func newSynth(big bool) *synth {
	s := &synth{bo: binary.LittleEndian, features: map[Feature][]byte{}, attrSize: attrSizeVer8}
	if big {
		s.bo = binary.BigEndian
	}
	return s
}

func (s *synth) magic() []byte {
	if s.bo == binary.BigEndian {
		return []byte(MagicBE)
	}
	return []byte(MagicLE)
}

func (s *synth) encAttr(a Attr) []byte {
	p := make([]byte, s.attrSize)
	bo := s.bo
	put32 := func(off int, v uint32) {
		if off+4 <= len(p) {
			bo.PutUint32(p[off:], v)
		}
	}
	put64 := func(off int, v uint64) {
		if off+8 <= len(p) {
			bo.PutUint64(p[off:], v)
		}
	}
	put32(0, uint32(a.Type))
	put32(4, uint32(s.attrSize))
	put64(8, a.Config)
	put64(16, a.SamplePeriod)
	put64(24, uint64(a.SampleType))
	put64(32, uint64(a.ReadFormat))
	put64(40, uint64(a.Flags))
	put64(72, a.BranchSampleType)
	put64(80, a.SampleRegsUser)
	put32(88, a.SampleStackUser)
	put64(96, a.SampleRegsIntr)
	return p
}

func (s *synth) addEvent(a Attr, name string, ids ...uint64) {
	s.events = append(s.events, synthEvent{a, ids, name})
}

// record appends a record with the given type, misc and body (padded to 8).
func (s *synth) record(typ RecordType, misc uint16, body []byte) []byte {
	for len(body)%8 != 0 {
		body = append(body, 0)
	}
	return s.recordNoPad(typ, misc, body)
}

// recordNoPad appends a record without padding (perf does not pad COMPRESSED).
func (s *synth) recordNoPad(typ RecordType, misc uint16, body []byte) []byte {
	rec := make([]byte, 8+len(body))
	s.bo.PutUint32(rec, uint32(typ))
	s.bo.PutUint16(rec[4:], misc)
	s.bo.PutUint16(rec[6:], uint16(8+len(body)))
	copy(rec[8:], body)
	s.data.Write(rec)
	return rec
}

type wbuf struct {
	bo binary.ByteOrder
	b  []byte
}

func (w *wbuf) u8(v uint8) { w.b = append(w.b, v) }
func (w *wbuf) abo() binary.AppendByteOrder {
	if w.bo == binary.BigEndian {
		return binary.BigEndian
	}
	return binary.LittleEndian
}
func (w *wbuf) u16(v uint16) { w.b = w.abo().AppendUint16(w.b, v) }
func (w *wbuf) u32(v uint32) { w.b = w.abo().AppendUint32(w.b, v) }
func (w *wbuf) u64(v uint64) { w.b = w.abo().AppendUint64(w.b, v) }
func (w *wbuf) str(v string, pad int) {
	n := len(v) + 1
	if pad > 0 {
		n = (n + pad - 1) / pad * pad
	}
	w.b = append(w.b, v...)
	w.b = append(w.b, make([]byte, n-len(v))...)
}
func (w *wbuf) hstr(v string) { // perf_header_string
	n := (len(v) + 1 + 7) &^ 7
	w.u32(uint32(n))
	w.str(v, 8)
}

// u64If appends v when has is set: the encoding side of buf.u64If.
func (w *wbuf) u64If(has bool, v uint64) {
	if has {
		w.u64(v)
	}
}

// regs appends a PERF_SAMPLE_REGS_USER or _INTR block: the ABI, then the
// registers unless the ABI is PERF_SAMPLE_REGS_ABI_NONE (0).
func (w *wbuf) regs(abi uint64, regs []uint64) {
	w.u64(abi)
	if abi != 0 {
		for _, r := range regs {
			w.u64(r)
		}
	}
}

// readValues appends v in read_format rf's layout: a group is nr, the times,
// then value (id, lost) per member; a single counter is its value, the
// times, then its id and lost count.
func (w *wbuf) readValues(rf ReadFormat, v *ReadValues) {
	if rf&ReadGroup != 0 {
		w.u64(uint64(len(v.Values)))
		w.u64If(rf&ReadTotalTimeEnabled != 0, v.TimeEnabled)
		w.u64If(rf&ReadTotalTimeRunning != 0, v.TimeRunning)
		for _, x := range v.Values {
			w.u64(x.Value)
			w.u64If(rf&ReadID != 0, x.ID)
			w.u64If(rf&ReadLost != 0, x.Lost)
		}
		return
	}
	x := v.Values[0]
	w.u64(x.Value)
	w.u64If(rf&ReadTotalTimeEnabled != 0, v.TimeEnabled)
	w.u64If(rf&ReadTotalTimeRunning != 0, v.TimeRunning)
	w.u64If(rf&ReadID != 0, x.ID)
	w.u64If(rf&ReadLost != 0, x.Lost)
}

// trailer encodes a sample_id_all trailer for event ev.
func (s *synth) trailer(ev int, id SampleID) []byte {
	w := wbuf{bo: s.bo}
	st := s.events[ev].attr.SampleType
	if st&SampleTID != 0 {
		w.u32(id.Pid)
		w.u32(id.Tid)
	}
	w.u64If(st&SampleTime != 0, id.Time)
	w.u64If(st&SampleID_ != 0, s.events[ev].ids[0])
	w.u64If(st&SampleStreamID != 0, id.StreamID)
	if st&SampleCPU != 0 {
		w.u32(id.CPU)
		w.u32(0)
	}
	w.u64If(st&SampleIdentifier != 0, s.events[ev].ids[0])
	return w.b
}

// sample appends a PERF_RECORD_SAMPLE of event ev holding x's fields.
func (s *synth) sample(ev int, x *Sample) []byte {
	a := &s.events[ev].attr
	st := a.SampleType
	id := s.events[ev].ids[0]
	w := wbuf{bo: s.bo}
	w.u64If(st&SampleIdentifier != 0, id)
	w.u64If(st&SampleIP != 0, x.IP)
	if st&SampleTID != 0 {
		w.u32(x.Pid)
		w.u32(x.Tid)
	}
	w.u64If(st&SampleTime != 0, x.Time)
	w.u64If(st&SampleAddr != 0, x.Addr)
	w.u64If(st&SampleID_ != 0, id)
	w.u64If(st&SampleStreamID != 0, x.StreamID)
	if st&SampleCPU != 0 {
		w.u32(x.CPU)
		w.u32(0)
	}
	w.u64If(st&SamplePeriod != 0, x.Period)
	if st&SampleRead != 0 {
		w.readValues(a.ReadFormat, &x.Read)
	}
	if st&SampleCallchain != 0 {
		w.u64(uint64(len(x.Callchain)))
		for _, c := range x.Callchain {
			w.u64(c)
		}
	}
	if st&SampleRaw != 0 {
		// The u32 size plus data is padded to 8 bytes by the kernel.
		n := (len(x.Raw) + 4 + 7) &^ 7
		w.u32(uint32(n - 4))
		w.b = append(w.b, x.Raw...)
		w.b = append(w.b, make([]byte, n-4-len(x.Raw))...)
	}
	if st&SampleBranchStack != 0 {
		w.u64(uint64(len(x.Branches)))
		w.u64If(a.BranchSampleType&branchHWIndex != 0, x.BranchHWIndex)
		for _, br := range x.Branches {
			w.u64(br.From)
			w.u64(br.To)
			w.u64(br.Flags)
		}
	}
	if st&SampleRegsUser != 0 {
		w.regs(x.RegsABI, x.Regs)
	}
	if st&SampleStackUser != 0 {
		w.u64(x.StackSize)
		stack := make([]byte, x.StackSize)
		copy(stack, x.Stack)
		w.b = append(w.b, stack...)
		if x.StackSize != 0 {
			w.u64(uint64(len(x.Stack)))
		}
	}
	w.u64If(st&(SampleWeight|SampleWeightStruct) != 0, x.Weight)
	w.u64If(st&SampleDataSrc != 0, x.DataSrc)
	w.u64If(st&SampleTransaction != 0, x.Transaction)
	if st&SampleRegsIntr != 0 {
		w.regs(x.RegsIntrABI, x.RegsIntr)
	}
	w.u64If(st&SamplePhysAddr != 0, x.PhysAddr)
	w.u64If(st&SampleCgroup != 0, x.Cgroup)
	w.u64If(st&SampleDataPageSize != 0, x.DataPageSize)
	w.u64If(st&SampleCodePageSize != 0, x.CodePageSize)
	if st&SampleAux != 0 {
		w.u64(uint64(len(x.Aux)))
		w.b = append(w.b, x.Aux...)
	}
	return s.record(RecordSample, 0, w.b)
}

func (s *synth) comm(ev int, pid, tid uint32, name string, exec bool, id SampleID) []byte {
	w := wbuf{bo: s.bo}
	w.u32(pid)
	w.u32(tid)
	w.str(name, 8)
	w.b = append(w.b, s.trailer(ev, id)...)
	var misc uint16
	if exec {
		misc = MiscCommExec
	}
	return s.record(RecordComm, misc, w.b)
}

func (s *synth) mmap2(ev int, pid uint32, addr, length, pgoff uint64, file string, buildID []byte, id SampleID) []byte {
	w := wbuf{bo: s.bo}
	w.u32(pid)
	w.u32(pid)
	w.u64(addr)
	w.u64(length)
	w.u64(pgoff)
	var misc uint16
	if buildID != nil {
		misc = MiscMmapBuildID
		w.u8(uint8(len(buildID)))
		w.u8(0)
		w.u16(0)
		var b [20]byte
		copy(b[:], buildID)
		w.b = append(w.b, b[:]...)
	} else {
		w.u32(8)
		w.u32(1)
		w.u64(1234)
		w.u64(5)
	}
	w.u32(5) // prot
	w.u32(2) // flags
	w.str(file, 8)
	w.b = append(w.b, s.trailer(ev, id)...)
	return s.record(RecordMmap2, misc|2, w.b)
}

func (s *synth) finishedRound() []byte { return s.record(RecordFinishedRound, 0, nil) }

// eventDesc encodes the EVENT_DESC feature.
func (s *synth) eventDesc() []byte {
	w := wbuf{bo: s.bo}
	w.u32(uint32(len(s.events)))
	w.u32(uint32(s.attrSize))
	for _, ev := range s.events {
		w.b = append(w.b, s.encAttr(ev.attr)...)
		w.u32(uint32(len(ev.ids)))
		w.hstr(ev.name)
		for _, id := range ev.ids {
			w.u64(id)
		}
	}
	return w.b
}

// file returns a file-mode perf.data.
func (s *synth) file() []byte {
	bo := s.bo
	if _, ok := s.features[FeatEventDesc]; !ok && len(s.events) > 0 && s.events[0].name != "" {
		s.features[FeatEventDesc] = s.eventDesc()
	}
	var out bytes.Buffer
	out.Write(make([]byte, fileHeaderSize))
	entry := s.attrSize + 16
	// id tables first, then attrs, then data.
	idOffs := make([]int, len(s.events))
	for i, ev := range s.events {
		idOffs[i] = out.Len()
		for _, id := range ev.ids {
			var b [8]byte
			bo.PutUint64(b[:], id)
			out.Write(b[:])
		}
	}
	attrsOff := out.Len()
	for i, ev := range s.events {
		out.Write(s.encAttr(ev.attr))
		var b [16]byte
		bo.PutUint64(b[:], uint64(idOffs[i]))
		bo.PutUint64(b[8:], uint64(8*len(ev.ids)))
		out.Write(b[:])
	}
	dataOff := out.Len()
	out.Write(s.data.Bytes())
	dataSize := s.data.Len()
	var feats []Feature
	for f := range s.features {
		feats = append(feats, f)
	}
	slices.Sort(feats)
	tabOff := out.Len()
	out.Write(make([]byte, 16*len(feats)))
	var secs [][2]uint64
	for _, f := range feats {
		secs = append(secs, [2]uint64{uint64(out.Len()), uint64(len(s.features[f]))})
		out.Write(s.features[f])
	}
	p := out.Bytes()
	for i, sec := range secs {
		bo.PutUint64(p[tabOff+16*i:], sec[0])
		bo.PutUint64(p[tabOff+16*i+8:], sec[1])
	}
	copy(p, s.magic())
	bo.PutUint64(p[8:], fileHeaderSize)
	bo.PutUint64(p[16:], uint64(entry))
	bo.PutUint64(p[24:], uint64(attrsOff))
	bo.PutUint64(p[32:], uint64(entry*len(s.events)))
	bo.PutUint64(p[40:], uint64(dataOff))
	bo.PutUint64(p[48:], uint64(dataSize))
	for _, f := range feats {
		w := p[72+8*(f/64):]
		bo.PutUint64(w, bo.Uint64(w)|1<<(f%64))
	}
	return p
}

// pipe returns a pipe-mode perf.data: attrs, names and features as records.
func (s *synth) pipe() []byte {
	bo := s.bo
	var out bytes.Buffer
	out.Write(s.magic())
	var b [8]byte
	bo.PutUint64(b[:], pipeHeaderSize)
	out.Write(b[:])
	hdr := newSynth(bo == binary.BigEndian)
	for _, ev := range s.events {
		w := wbuf{bo: bo}
		w.b = append(w.b, s.encAttr(ev.attr)...)
		for _, id := range ev.ids {
			w.u64(id)
		}
		hdr.record(RecordHeaderAttr, 0, w.b)
	}
	for f, data := range s.features {
		w := wbuf{bo: bo}
		w.u64(uint64(f))
		w.b = append(w.b, data...)
		hdr.record(RecordHeaderFeature, 0, w.b)
	}
	for _, ev := range s.events {
		if ev.name == "" {
			continue
		}
		w := wbuf{bo: bo}
		w.u64(eventUpdateName)
		w.u64(ev.ids[0])
		w.str(ev.name, 8)
		hdr.record(RecordEventUpdate, 0, w.b)
	}
	out.Write(hdr.data.Bytes())
	out.Write(s.data.Bytes())
	return out.Bytes()
}

// compress replaces the data with COMPRESSED records the way perf record -z
// writes them: one zstd stream flushed at the end of each record, cut at
// the given byte positions of the uncompressed data (so records can span
// two COMPRESSED records). With v2 it writes COMPRESSED2 records.
func (s *synth) compress(cuts []int, v2 bool) {
	raw := append([]byte(nil), s.data.Bytes()...)
	s.data.Reset()
	var zb bytes.Buffer
	zw, err := zstd.NewWriter(&zb, zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err)
	}
	prev := 0
	cuts = append(cuts, len(raw))
	for _, c := range cuts {
		if c <= prev {
			continue
		}
		zw.Write(raw[prev:c])
		zw.Flush()
		payload := append([]byte(nil), zb.Bytes()...)
		zb.Reset()
		if v2 {
			w := wbuf{bo: s.bo}
			w.u64(uint64(len(payload)))
			w.b = append(w.b, payload...)
			s.record(RecordCompressed2, 0, w.b)
		} else {
			s.recordNoPad(RecordCompressed, 0, payload)
		}
		prev = c
	}
	zw.Close()
}
