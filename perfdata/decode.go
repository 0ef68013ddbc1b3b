package perfdata

import (
	"fmt"
)

// processUser applies perf's own records (types >= 64) to the reader state
// as soon as they are read: they describe the events that later records
// refer to (pipe mode) and are never reordered.
func (r *Reader) processUser(typ RecordType, rec rawRec) {
	body := rec.data[8:]
	b := makeBuf(body, rec.off+8, r.bo, typ.String())
	switch typ {
	case RecordHeaderAttr:
		n := attrLen(body, r.bo)
		if n < attrSizeVer0 || n > len(body) {
			r.warn(&FormatError{Offset: rec.off, Msg: fmt.Sprintf("HEADER_ATTR with attr size %d in a %d-byte record; skipped", n, len(body))})
			return
		}
		ev := &Event{Attr: parseAttr(body[:n], r.bo)}
		for k := n; k+8 <= len(body); k += 8 {
			ev.IDs = append(ev.IDs, r.bo.Uint64(body[k:]))
		}
		ev.Name = synthName(&ev.Attr)
		r.addEvent(ev)
		r.attachFormats()
	case RecordEventUpdate:
		utype := b.u64()
		id := b.u64()
		if b.err == nil && utype == eventUpdateName {
			if ev := r.ids.byID[id]; ev != nil {
				ev.Name = cstr(b.b[b.off:])
				ev.named = true
			}
		}
	case RecordHeaderEventType:
		// Old pipe files name tracepoints here: {u64 event_id; char name[64]}.
		id := b.u64()
		name := cstr(b.bytes(min(64, uint64(b.left()))))
		if b.err == nil && name != "" {
			for _, ev := range r.events {
				if !ev.named && ev.Attr.Type == TypeTracepoint && ev.Attr.Config == id {
					ev.Name, ev.named = name, true
				}
			}
		}
	case RecordHeaderTracing:
		if len(rec.extra) > 0 {
			td, err := parseTracingData(rec.extra, rec.off+int64(len(rec.data)))
			if td != nil {
				r.meta.Tracing = td
				r.attachFormats()
			}
			if err != nil {
				r.warn(err)
			}
		}
		r.addFeature(FeatTracingData)
	case RecordHeaderBuildID:
		var bid BuildID
		parseBuildIDEvent(&bid, &b, r.bo.Uint16(rec.data[4:]))
		if b.err == nil {
			r.meta.BuildIDs = append(r.meta.BuildIDs, bid)
			r.addFeature(FeatBuildID)
		}
	case RecordHeaderFeature:
		f := b.u64()
		if b.err == nil && f < featBits && f != featLastFeature {
			r.addFeature(Feature(f))
			if err := r.parseFeature(Feature(f), body[8:], rec.off+16); err != nil {
				r.warn(fmt.Errorf("feature %s: %w", Feature(f), err))
			}
		}
	case RecordIDIndex:
		n := b.u64()
		if n > uint64(b.left())/32 {
			r.warn(&FormatError{Offset: rec.off, Msg: fmt.Sprintf("ID_INDEX claims %d entries in %d bytes; skipped", n, len(body))})
			return
		}
		for i := uint64(0); i < n; i++ {
			id, idx := b.u64(), b.u64()
			b.u64()
			b.u64()
			if _, ok := r.ids.byID[id]; !ok && idx < uint64(len(r.events)) {
				ev := r.events[idx]
				ev.IDs = append(ev.IDs, id)
				r.ids.byID[id] = ev
			}
		}
	}
}

func (r *Reader) addFeature(f Feature) {
	for _, x := range r.meta.Features {
		if x == f {
			return
		}
	}
	r.meta.Features = append(r.meta.Features, f)
}

// deliver decodes rec into its reused record struct and makes it current.
// A record whose contents do not parse becomes a *Raw plus a warning.
func (r *Reader) deliver(rec rawRec) bool {
	out, err := r.decode(rec)
	if err != nil {
		r.stats.BadRecords++
		r.warn(err)
		raw := &r.rec.raw
		raw.RecordCommon = RecordCommon{Type: RecordType(r.bo.Uint32(rec.data)), Misc: r.bo.Uint16(rec.data[4:]), Offset: rec.off}
		raw.Data = rec.data[8:]
		out = raw
	}
	r.cur = out
	r.curChunk = rec.ch
	if rec.ch == nil {
		r.src.res.touch(rec.off, len(rec.data)+len(rec.extra))
	}
	t := out.Common().Type
	if t < 128 {
		r.stats.Records[t]++
	} else {
		r.stats.Records[0]++
	}
	return true
}

// decode parses rec into the reused record struct of its type.
func (r *Reader) decode(rec rawRec) (Record, error) {
	data := rec.data
	bo := r.bo
	typ := RecordType(bo.Uint32(data))
	misc := bo.Uint16(data[4:])
	body := data[8:]
	common := RecordCommon{Type: typ, Misc: misc, Offset: rec.off}

	if typ == RecordSample {
		return r.decodeSample(rec.off, common, body)
	}
	if typ < 64 {
		if ev := r.trailerEvent(body); ev != nil {
			n, ok := parseTrailer(body, ev.Attr.SampleType, bo, &common.SampleID)
			if !ok {
				return nil, &FormatError{Offset: rec.off, Msg: fmt.Sprintf("%s record of %d bytes is too short for its sample_id trailer", typ, len(data))}
			}
			body = body[:n]
		}
	}
	b := makeBuf(body, rec.off+8, bo, typ.String())
	out := r.rec.of(typ)
	*out.Common() = common
	switch x := out.(type) {
	case *Raw:
		x.Data = body
	default:
		if !r.parseKernelRecord(out, &b, body, common) {
			r.parseUserRecord(out, &b, body, rec, common)
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	r.countLoss(out)
	return out, nil
}

// decodeSample decodes a SAMPLE record's body into the reused Sample with
// the layout of the event its id names, and counts it.
func (r *Reader) decodeSample(off int64, common RecordCommon, body []byte) (Record, error) {
	ev := r.sampleEvent(body)
	if ev == nil {
		return nil, &FormatError{Offset: off, Msg: "sample with an id that matches no event"}
	}
	s := &r.rec.sample
	s.RecordCommon = common
	b := makeBuf(body, off+8, r.bo, "SAMPLE")
	parseSample(s, &b, ev)
	if b.err != nil {
		return nil, b.err
	}
	ev.Samples++
	r.stats.Samples++
	if s.Has&SampleTime != 0 {
		if r.stats.FirstSample == 0 || s.Time < r.stats.FirstSample {
			r.stats.FirstSample = s.Time
		}
		if s.Time > r.stats.LastSample {
			r.stats.LastSample = s.Time
		}
	}
	return s, nil
}

// parseKernelRecord parses the body of a record the kernel writes (types
// below 64) into out; it reports false for a record of another kind.
func (r *Reader) parseKernelRecord(out Record, b *buf, body []byte, common RecordCommon) bool {
	typ, misc := common.Type, common.Misc
	switch x := out.(type) {
	case *Mmap:
		parseMmap(x, b, typ, misc)
	case *Comm:
		x.Pid = b.u32()
		x.Tid = b.u32()
		x.Comm = cstr(b.b[b.off:])
		x.Exec = misc&MiscCommExec != 0
	case *Fork:
		x.Pid, x.Ppid, x.Tid, x.Ptid = b.u32(), b.u32(), b.u32(), b.u32()
		x.Time = b.u64()
	case *Exit:
		x.Pid, x.Ppid, x.Tid, x.Ptid = b.u32(), b.u32(), b.u32(), b.u32()
		x.Time = b.u64()
	case *Lost:
		x.ID, x.Count = b.u64(), b.u64()
		x.Event = r.lostEvent(x.ID)
	case *LostSamples:
		x.Count = b.u64()
		x.Event = r.lostEvent(common.ID)
	case *Throttle:
		x.Time, x.ID, x.StreamID = b.u64(), b.u64(), b.u64()
	case *Read:
		x.Pid, x.Tid = b.u32(), b.u32()
		var rf ReadFormat
		if ev := r.trailerEvent(body); ev != nil {
			rf = ev.Attr.ReadFormat
		} else if len(r.events) > 0 {
			rf = r.events[0].Attr.ReadFormat
		}
		parseReadValues(&x.Values, b, rf)
	case *Aux:
		x.AuxOffset, x.AuxSize, x.Flags = b.u64(), b.u64(), b.u64()
	case *ItraceStart:
		x.Pid, x.Tid = b.u32(), b.u32()
	case *Switch:
		x.Out = misc&MiscSwitchOut != 0
		x.NextPrevPid, x.NextPrevTid = 0, 0
		if typ == RecordSwitchCPUWide {
			x.NextPrevPid, x.NextPrevTid = b.u32(), b.u32()
		}
	case *Namespaces:
		x.Pid, x.Tid = b.u32(), b.u32()
		x.Namespaces = x.Namespaces[:0]
		for range b.count(16) {
			x.Namespaces = append(x.Namespaces, NamespaceLink{b.u64(), b.u64()})
		}
	case *Ksymbol:
		x.Addr, x.Len, x.KsymType, x.Flags = b.u64(), b.u32(), b.u16(), b.u16()
		x.Name = cstr(b.b[b.off:])
	case *BPFEvent:
		x.EventType, x.Flags, x.ID = b.u16(), b.u16(), b.u32()
		copy(x.Tag[:], b.bytes(8))
	case *Cgroup:
		x.ID = b.u64()
		x.Path = cstr(b.b[b.off:])
	case *TextPoke:
		x.Addr = b.u64()
		ol, nl := b.u16(), b.u16()
		x.Old = b.bytes(uint64(ol))
		x.New = b.bytes(uint64(nl))
	default:
		return false
	}
	return true
}

// parseUserRecord parses the body of a record perf itself writes (types 64
// and up: header attributes, features, statistics, time conversion) into out.
func (r *Reader) parseUserRecord(out Record, b *buf, body []byte, rec rawRec, common RecordCommon) {
	bo := r.bo
	misc := common.Misc
	switch x := out.(type) {
	case *Marker:
	case *IDIndex:
		x.Entries = x.Entries[:0]
		for range b.count(32) {
			x.Entries = append(x.Entries, IDIndexEntry{b.u64(), b.u64(), b.u64(), b.u64()})
		}
	case *ThreadMap:
		x.Threads = x.Threads[:0]
		for range b.count(24) {
			x.Threads = append(x.Threads, ThreadMapEntry{b.u64(), cstr(b.bytes(16))})
		}
	case *CPUMap:
		parseCPUMap(x, b)
	case *TimeConv:
		*x = TimeConv{RecordCommon: common}
		x.TimeShift, x.TimeMult, x.TimeZero = b.u64(), b.u64(), b.u64()
		if b.left() >= 16 {
			x.TimeCycles, x.TimeMask = b.u64(), b.u64()
		}
		if b.left() >= 2 {
			x.CapUserTimeZero = b.u8() != 0
			x.CapUserTimeShort = b.u8() != 0
		}
	case *Stat:
		x.ID = b.u64()
		x.CPU, x.Thread = b.u32(), b.u32()
		x.Val, x.Ena, x.Run = b.u64(), b.u64(), b.u64()
	case *StatRound:
		x.RoundType, x.Time = b.u64(), b.u64()
	case *StatConfig:
		x.Entries = x.Entries[:0]
		for range b.count(16) {
			x.Entries = append(x.Entries, StatConfigEntry{b.u64(), b.u64()})
		}
	case *EventUpdate:
		*x = EventUpdate{RecordCommon: common}
		x.UpdateType = b.u64()
		x.ID = b.u64()
		x.Data = b.b[b.off:]
		switch x.UpdateType {
		case eventUpdateName:
			x.Name = cstr(x.Data)
		case eventUpdateUnit:
			x.Unit = cstr(x.Data)
		case eventUpdateScale:
			x.Scale = float64frombits(b.u64())
		}
	case *HeaderAttr:
		n := attrLen(body, bo)
		if n > len(body) {
			b.fail(n)
			break
		}
		x.Attr = parseAttr(body[:n], bo)
		x.IDs = x.IDs[:0]
		for k := n; k+8 <= len(body); k += 8 {
			x.IDs = append(x.IDs, bo.Uint64(body[k:]))
		}
	case *HeaderTracingData:
		x.Data = rec.extra
	case *HeaderBuildID:
		parseBuildIDEvent(&x.BuildID, b, misc)
	case *HeaderFeature:
		x.Feature = int(b.u64())
		x.Data = b.b[b.off:]
	case *Auxtrace:
		x.Size, x.Offset, x.Reference = b.u64(), b.u64(), b.u64()
		x.Idx, x.Tid, x.CPU = b.u32(), b.u32(), b.u32()
		x.Data = rec.extra
	}
}

// countLoss adds the count of a whole LOST or LOST_SAMPLES record to the
// reader's totals and to its event's: LOST counts what a ring buffer
// dropped (all events on it), LOST_SAMPLES what one event dropped.
func (r *Reader) countLoss(rec Record) {
	switch x := rec.(type) {
	case *Lost:
		r.stats.Lost += x.Count
		if x.Event != nil {
			x.Event.LostBuffer += x.Count
		}
	case *LostSamples:
		r.stats.LostSamples += x.Count
		if x.Event != nil {
			x.Event.Lost += x.Count
		}
	}
}

// lostEvent resolves the event a LOST or LOST_SAMPLES record names; with a
// single event there is no doubt even without ids.
func (r *Reader) lostEvent(id uint64) *Event {
	if ev := r.ids.byID[id]; ev != nil {
		return ev
	}
	if len(r.events) == 1 {
		return r.events[0]
	}
	return nil
}
