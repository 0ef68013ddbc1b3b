package recorder

import (
	"encoding/binary"

	"github.com/faultline/faultline/perfdata"
)

// Twinned events and a kernel quirk.
//
// A stack instance and its range twin are the same event source opened
// twice, so one hit makes both overflow in one pass over the kernel's
// event list, and the kernel prepares both samples in one shared
// perf_sample_data. perf_prepare_sample skips what that data already holds
// (data->sample_flags): the second event of the pass gets the first one's
// sample. perf_tp_event re-initializes the data per event (tracepoints are
// fine on recent kernels), do_perf_sw_event does not: seen on 6.18 with
// --fault-stacks, for every sampled fault the range ring held a copy of
// the stack event's sample (its id, its layout, its stack) and the range
// event's own sample was missing. The ring a record comes from tells which
// event wrote it, so:
//
//   - in a range ring, a sample with a stack instance's id is the range
//     event's sample: its id becomes the twin's and the callchain,
//     registers and stack are cut, giving the range layout;
//   - in a stack ring, a sample with a range event's id is a copy of the
//     range sample written for the stack event: it is dropped, so no call
//     or fault is counted twice.

// twinOf maps a stack instance's id to its range twin's (same CPU, same
// thread); rangeIDs holds the range events' ids.
type twins struct {
	twinOf   map[uint64]uint64
	rangeIDs map[uint64]bool
	fix      []byte
	repaired uint64
	dropped  uint64
}

// prefixLen is the length of the fields before CALLCHAIN in a stack
// instance's sample, which the range layout shares: IDENTIFIER, IP, TID,
// TIME, ADDR (faults), CPU.
func prefixLen(st perfdata.SampleFormat) int {
	n := 8 * 4 // IDENTIFIER, IP, TID, TIME
	if st&perfdata.SampleAddr != 0 {
		n += 8
	}
	return n + 8 // CPU
}

// repair rewrites raw (a sample read from a ring of kind k) when the
// kernel mixed the twins up; keep is false when the record must be
// dropped. attrs maps ids to their sample_type.
func (t *twins) repair(k kind, raw *rawRecord, st func(uint64) (perfdata.SampleFormat, bool)) (body []byte, keep bool) {
	d := raw.Data
	if uint32(raw.Header.Type) != uint32(perfdata.RecordSample) || len(d) < 8 || t.twinOf == nil {
		return d, true
	}
	ne := binary.NativeEndian
	id := ne.Uint64(d)
	switch k {
	case kindStack:
		if t.rangeIDs[id] {
			t.dropped++
			return nil, false
		}
	case kindRange:
		twin, ok := t.twinOf[id]
		if !ok {
			return d, true
		}
		format, _ := st(id)
		p := prefixLen(format)
		// CALLCHAIN (nr, ips) at p, then RAW (u32 size + data, 8-aligned)
		// when the event has it; the registers and stack after it are
		// the stack instance's and are dropped.
		if len(d) < p+8 {
			return d, true
		}
		q := p + 8 + 8*int(min(ne.Uint64(d[p:]), uint64(len(d))))
		end := q
		if format&perfdata.SampleRaw != 0 {
			if len(d) < q+4 {
				return d, true
			}
			end = q + 4 + int(ne.Uint32(d[q:]))
		}
		if end > len(d) {
			return d, true
		}
		t.fix = append(append(t.fix[:0], d[:p]...), d[q:end]...)
		ne.PutUint64(t.fix, twin)
		t.repaired++
		return t.fix, true
	}
	return d, true
}
