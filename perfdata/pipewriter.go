package perfdata

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Pipe mode (perf record -o -) writes everything in one pass: a 16-byte
// header, then what file mode keeps in its header as records
// (tools/perf/util/synthetic-events.c, perf_event__synthesize_for_pipe):
// HEADER_ATTR per event, HEADER_FEATURE per feature section, then
// HEADER_TRACING_DATA followed by the tracing data itself. A reader learns
// the events before the first sample that refers to them.

// pipeState is what a pipe-mode Writer remembers of its start.
type pipeState struct {
	sent [featBits]bool // features already written as HEADER_FEATURE
}

// NewPipeWriter starts a pipe-mode recording on out, as `perf record -o -`
// writes it, for readers that cannot seek (`faultline analyze -`,
// `perf script -i -`). head holds the features known before the first
// record; its TracingData must be there, since tracepoint samples cannot be
// decoded before it. Features given only to Finish (build ids, sample
// times) follow the data. opts work as for NewWriter.
func NewPipeWriter(out io.Writer, events []WriterEvent, head *WriterFeatures, opts *WriterOptions) (*Writer, error) {
	if len(events) == 0 {
		return nil, errors.New("perfdata: writer needs at least one event")
	}
	w := &Writer{bw: bufio.NewWriterSize(out, writeBuffer), events: events, pipe: &pipeState{}}
	if err := w.startCompression(opts); err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	h := le.AppendUint64([]byte(MagicLE), pipeHeaderSize)
	w.write(h)
	for _, ev := range events {
		body := appendAttr(nil, &ev.Attr)
		for _, id := range ev.IDs {
			body = le.AppendUint64(body, id)
		}
		if err := w.pipeRecord(RecordHeaderAttr, body); err != nil {
			return nil, fmt.Errorf("perfdata: HEADER_ATTR of %s with %d ids: %w (perf has the same limit; record fewer threads or CPUs)", ev.Name, len(ev.IDs), err)
		}
	}
	// EVENT_UPDATE names each event, as perf does in pipe mode; EVENT_DESC
	// below names them too, but can outgrow a record with many ids.
	for _, ev := range events {
		if len(ev.IDs) == 0 {
			continue
		}
		body := le.AppendUint64(nil, eventUpdateName)
		body = le.AppendUint64(body, ev.IDs[0])
		body = append(body, ev.Name...)
		body = append(body, make([]byte, 8-len(ev.Name)%8)...) // NUL, padded to 8
		if err := w.pipeRecord(RecordEventUpdate, body); err != nil {
			return nil, fmt.Errorf("perfdata: event name %.40q…: %w", ev.Name, err)
		}
	}
	if head == nil {
		head = &WriterFeatures{}
	}
	for _, ft := range w.featureSections(head) {
		switch ft.bit {
		case FeatTracingData:
			continue // its own record, after the features
		case FeatBuildID:
			return nil, errors.New("perfdata: pipe mode: give build ids to Finish")
		case FeatEventDesc:
			if len(ft.body) > 0xffff-16 {
				continue // EVENT_UPDATE has named the events
			}
		}
		if err := w.pipeFeature(ft); err != nil {
			return nil, err
		}
	}
	w.pipeFeature(featureSection{bit: featLastFeature})
	if td := head.TracingData; len(td) > 0 {
		w.pipe.sent[FeatTracingData] = true
		// perf_record_header_tracing_data: header, u32 size (padded to 8),
		// u32 pad; the data follows outside header.size.
		n := (len(td) + 7) &^ 7
		body := le.AppendUint32(nil, uint32(n))
		body = le.AppendUint32(body, 0)
		w.pipeRecord(RecordHeaderTracing, body)
		w.write(td)
		w.write(make([]byte, n-len(td)))
	}
	return w, w.err
}

// pipeRecord writes one uncompressed record of typ with body.
func (w *Writer) pipeRecord(typ RecordType, body []byte) error {
	if n := 8 + len(body); n > 0xffff {
		return fmt.Errorf("record of %d bytes exceeds the u16 size field", n)
	}
	var h [8]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(typ))
	binary.LittleEndian.PutUint16(h[6:], uint16(8+len(body)))
	w.write(h[:])
	w.write(body)
	return w.err
}

// pipeFeature writes ft as a HEADER_FEATURE record: u64 feat_id, then the
// section as file mode stores it.
func (w *Writer) pipeFeature(ft featureSection) error {
	body := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(ft.body)), uint64(ft.bit))
	if err := w.pipeRecord(RecordHeaderFeature, append(body, ft.body...)); err != nil {
		return fmt.Errorf("perfdata: feature %s: %w", ft.bit, err)
	}
	if ft.bit < featBits {
		w.pipe.sent[ft.bit] = true
	}
	return nil
}

// finishPipe ends the data and writes what could not be known at the start:
// HEADER_BUILD_ID records and the features of f not yet written. The
// stream is complete when it returns nil.
func (w *Writer) finishPipe(f *WriterFeatures) error {
	if err := w.endCompression(); err != nil {
		return err
	}
	if f == nil {
		f = &WriterFeatures{}
	}
	if len(f.TracingData) > 0 && !w.pipe.sent[FeatTracingData] {
		return errors.New("perfdata: pipe mode: tracing data must be given to NewPipeWriter, before the samples it describes")
	}
	// A BUILD_ID section is a run of HEADER_BUILD_ID records already.
	w.write(appendBuildIDs(nil, f.BuildIDs))
	for _, ft := range w.featureSections(f) {
		// COMPRESSED again: its ratio is known now.
		if ft.bit == FeatBuildID || w.pipe.sent[ft.bit] && ft.bit != FeatCompressed {
			continue
		}
		if err := w.pipeFeature(ft); err != nil {
			return err
		}
	}
	if w.err == nil {
		w.err = w.bw.Flush()
	}
	return w.err
}
