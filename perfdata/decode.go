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
			if ev := r.byID[id]; ev != nil {
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
		}
	case RecordHeaderFeature:
		f := b.u64()
		if b.err == nil && f < featBits {
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
			if _, ok := r.byID[id]; !ok && idx < uint64(len(r.events)) {
				ev := r.events[idx]
				ev.IDs = append(ev.IDs, id)
				r.byID[id] = ev
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

func (r *Reader) decode(rec rawRec) (Record, error) {
	data := rec.data
	bo := r.bo
	typ := RecordType(bo.Uint32(data))
	misc := bo.Uint16(data[4:])
	body := data[8:]
	common := RecordCommon{Type: typ, Misc: misc, Offset: rec.off}

	if typ == RecordSample {
		ev := r.sampleEvent(body)
		if ev == nil {
			return nil, &FormatError{Offset: rec.off, Msg: "sample with an id that matches no event"}
		}
		s := &r.rec.sample
		s.RecordCommon = common
		b := makeBuf(body, rec.off+8, bo, "SAMPLE")
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
	var out Record
	switch typ {
	case RecordMmap, RecordMmap2:
		m := &r.rec.mmap
		m.RecordCommon = common
		parseMmap(m, &b, typ, misc)
		out = m
	case RecordComm:
		c := &r.rec.comm
		c.RecordCommon = common
		c.Pid = b.u32()
		c.Tid = b.u32()
		c.Comm = cstr(b.b[b.off:])
		c.Exec = misc&MiscCommExec != 0
		out = c
	case RecordFork:
		f := &r.rec.fork
		f.RecordCommon = common
		f.Pid, f.Ppid, f.Tid, f.Ptid = b.u32(), b.u32(), b.u32(), b.u32()
		f.Time = b.u64()
		out = f
	case RecordExit:
		e := &r.rec.exit
		e.RecordCommon = common
		e.Pid, e.Ppid, e.Tid, e.Ptid = b.u32(), b.u32(), b.u32(), b.u32()
		e.Time = b.u64()
		out = e
	case RecordLost:
		l := &r.rec.lost
		l.RecordCommon = common
		l.ID = b.u64()
		l.Count = b.u64()
		if b.err != nil {
			break
		}
		l.Event = r.lostEvent(l.ID)
		if l.Event != nil {
			l.Event.LostBuffer += l.Count
		}
		r.stats.Lost += l.Count
		out = l
	case RecordLostSamples:
		l := &r.rec.lostSamples
		l.RecordCommon = common
		l.Count = b.u64()
		if b.err != nil {
			break
		}
		l.Event = r.lostEvent(common.ID)
		if l.Event != nil {
			l.Event.Lost += l.Count
		}
		r.stats.LostSamples += l.Count
		out = l
	case RecordThrottle, RecordUnthrottle:
		t := &r.rec.throttle
		t.RecordCommon = common
		t.Time, t.ID, t.StreamID = b.u64(), b.u64(), b.u64()
		out = t
	case RecordRead:
		x := &r.rec.read
		x.RecordCommon = common
		x.Pid, x.Tid = b.u32(), b.u32()
		var rf uint64
		if ev := r.trailerEvent(body); ev != nil {
			rf = ev.Attr.ReadFormat
		} else if len(r.events) > 0 {
			rf = r.events[0].Attr.ReadFormat
		}
		parseReadValues(&x.Values, &b, rf)
		out = x
	case RecordAux:
		x := &r.rec.aux
		x.RecordCommon = common
		x.AuxOffset, x.AuxSize, x.Flags = b.u64(), b.u64(), b.u64()
		out = x
	case RecordItraceStart:
		x := &r.rec.itrace
		x.RecordCommon = common
		x.Pid, x.Tid = b.u32(), b.u32()
		out = x
	case RecordSwitch, RecordSwitchCPUWide:
		x := &r.rec.sw
		x.RecordCommon = common
		x.Out = misc&MiscSwitchOut != 0
		x.NextPrevPid, x.NextPrevTid = 0, 0
		if typ == RecordSwitchCPUWide {
			x.NextPrevPid, x.NextPrevTid = b.u32(), b.u32()
		}
		out = x
	case RecordNamespaces:
		x := &r.rec.ns
		x.RecordCommon = common
		x.Pid, x.Tid = b.u32(), b.u32()
		x.Namespaces = x.Namespaces[:0]
		for range b.count(16) {
			x.Namespaces = append(x.Namespaces, NamespaceLink{b.u64(), b.u64()})
		}
		out = x
	case RecordKsymbol:
		x := &r.rec.ksym
		x.RecordCommon = common
		x.Addr = b.u64()
		x.Len = b.u32()
		x.KsymType = b.u16()
		x.Flags = b.u16()
		x.Name = cstr(b.b[b.off:])
		out = x
	case RecordBPFEvent:
		x := &r.rec.bpf
		x.RecordCommon = common
		x.EventType, x.Flags, x.ID = b.u16(), b.u16(), b.u32()
		copy(x.Tag[:], b.bytes(8))
		out = x
	case RecordCgroup:
		x := &r.rec.cgroup
		x.RecordCommon = common
		x.ID = b.u64()
		x.Path = cstr(b.b[b.off:])
		out = x
	case RecordTextPoke:
		x := &r.rec.poke
		x.RecordCommon = common
		x.Addr = b.u64()
		ol, nl := b.u16(), b.u16()
		x.Old = b.bytes(uint64(ol))
		x.New = b.bytes(uint64(nl))
		out = x
	case RecordFinishedRound, RecordFinishedInit:
		x := &r.rec.marker
		x.RecordCommon = common
		out = x
	case RecordIDIndex:
		x := &r.rec.idIndex
		x.RecordCommon = common
		x.Entries = x.Entries[:0]
		for range b.count(32) {
			x.Entries = append(x.Entries, IDIndexEntry{b.u64(), b.u64(), b.u64(), b.u64()})
		}
		out = x
	case RecordThreadMap:
		x := &r.rec.threadMap
		x.RecordCommon = common
		x.Threads = x.Threads[:0]
		for range b.count(24) {
			x.Threads = append(x.Threads, ThreadMapEntry{b.u64(), cstr(b.bytes(16))})
		}
		out = x
	case RecordCPUMap:
		x := &r.rec.cpuMap
		x.RecordCommon = common
		parseCPUMap(x, &b)
		out = x
	case RecordTimeConv:
		x := &r.rec.timeConv
		x.RecordCommon = common
		*x = TimeConv{RecordCommon: common}
		x.TimeShift, x.TimeMult, x.TimeZero = b.u64(), b.u64(), b.u64()
		if b.left() >= 16 {
			x.TimeCycles, x.TimeMask = b.u64(), b.u64()
		}
		if b.left() >= 2 {
			x.CapUserTimeZero = b.u8() != 0
			x.CapUserTimeShort = b.u8() != 0
		}
		out = x
	case RecordStat:
		x := &r.rec.stat
		x.RecordCommon = common
		x.ID = b.u64()
		x.CPU, x.Thread = b.u32(), b.u32()
		x.Val, x.Ena, x.Run = b.u64(), b.u64(), b.u64()
		out = x
	case RecordStatRound:
		x := &r.rec.statRound
		x.RecordCommon = common
		x.RoundType, x.Time = b.u64(), b.u64()
		out = x
	case RecordStatConfig:
		x := &r.rec.statConfig
		x.RecordCommon = common
		x.Entries = x.Entries[:0]
		for range b.count(16) {
			x.Entries = append(x.Entries, StatConfigEntry{b.u64(), b.u64()})
		}
		out = x
	case RecordEventUpdate:
		x := &r.rec.eventUpdate
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
		out = x
	case RecordHeaderAttr:
		x := &r.rec.headerAttr
		x.RecordCommon = common
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
		out = x
	case RecordHeaderTracing:
		x := &r.rec.tracing
		x.RecordCommon = common
		x.Data = rec.extra
		out = x
	case RecordHeaderBuildID:
		x := &r.rec.buildID
		x.RecordCommon = common
		parseBuildIDEvent(&x.BuildID, &b, misc)
		out = x
	case RecordHeaderFeature:
		x := &r.rec.feature
		x.RecordCommon = common
		x.Feature = int(b.u64())
		x.Data = b.b[b.off:]
		out = x
	case RecordAuxtrace:
		x := &r.rec.auxtrace
		x.RecordCommon = common
		x.Size, x.Offset, x.Reference = b.u64(), b.u64(), b.u64()
		x.Idx, x.Tid, x.CPU = b.u32(), b.u32(), b.u32()
		x.Data = rec.extra
		out = x
	default:
		x := &r.rec.raw
		x.RecordCommon = common
		x.Data = body
		out = x
	}
	if b.err != nil {
		return nil, b.err
	}
	return out, nil
}

// lostEvent resolves the event a LOST or LOST_SAMPLES record names; with a
// single event there is no doubt even without ids.
func (r *Reader) lostEvent(id uint64) *Event {
	if ev := r.byID[id]; ev != nil {
		return ev
	}
	if len(r.events) == 1 {
		return r.events[0]
	}
	return nil
}
