package perfdata

import (
	"encoding/binary"
	"fmt"
	"io"
)

// A recording's tracepoint formats (TRACING_DATA) and event names
// (EVENT_DESC) are feature sections, written after the data section when
// the recording ends: a file cut short (killed recorder, full disk, a copy
// stopped early) has none, and its tracepoint samples cannot be decoded.
// The Writer therefore also stores a copy of both, the "early features",
// between the attr section and the data section. perf never reads there:
// it finds the attrs and the data by the offsets in the file header, so
// perf script and perf report read the file as before.
//
// Layout of the early block, which ends exactly at the data offset:
//
//	{ u64 feature; u64 size; u8 body[size]; pad to 8 }...
//	u64 block_size   // bytes of the entries above
//	char magic[8]    // earlyMagic
//
// The bodies are the feature sections' own encodings.
const (
	earlyMagic   = "FLEARLY1"
	earlyTrailer = 16
)

// appendEarlyFeatures appends the early block holding tracingData (if any)
// and EVENT_DESC.
func (w *Writer) appendEarlyFeatures(b, tracingData []byte) []byte {
	le := binary.LittleEndian
	start := len(b)
	entry := func(f Feature, body []byte) {
		b = le.AppendUint64(b, uint64(f))
		b = le.AppendUint64(b, uint64(len(body)))
		b = append(b, body...)
		b = append(b, make([]byte, (8-len(body)%8)%8)...)
	}
	if len(tracingData) > 0 {
		entry(FeatTracingData, tracingData)
	}
	entry(FeatEventDesc, w.eventDesc())
	b = le.AppendUint64(b, uint64(len(b)-start))
	return append(b, earlyMagic...)
}

// readEarlyFeatures looks for the early block that ends at the data offset
// and applies the features it holds that the file does not otherwise
// provide. It reports whether it found one.
func (r *Reader) readEarlyFeatures(ra io.ReaderAt, mem []byte, size int64, lowest, dataOff uint64) bool {
	if dataOff < lowest+earlyTrailer {
		return false
	}
	tr, err := readAt(ra, mem, size, int64(dataOff-earlyTrailer), earlyTrailer, "early features")
	if err != nil || string(tr[8:]) != earlyMagic {
		return false
	}
	n := r.bo.Uint64(tr)
	if n > dataOff-earlyTrailer-lowest || n > maxFeatureSize {
		r.warn(&FormatError{Offset: int64(dataOff - earlyTrailer), Msg: fmt.Sprintf("early feature block claims %d bytes; ignored", n)})
		return false
	}
	base := dataOff - earlyTrailer - n
	p, err := readAt(ra, mem, size, int64(base), n, "early features")
	if err != nil {
		r.warn(err)
		return false
	}
	for off := uint64(0); off+16 <= n; {
		f, l := Feature(r.bo.Uint64(p[off:])), r.bo.Uint64(p[off+8:])
		body := off + 16
		if l > n-body {
			r.warn(&FormatError{Offset: int64(base + off), Msg: fmt.Sprintf("early feature %s claims %d bytes, %d remain; ignored", f.String(), l, n-body)})
			return true
		}
		// A complete file's own sections win; EVENT_DESC names the same
		// events again.
		if f != FeatTracingData || r.meta.Tracing == nil {
			if !r.meta.HasFeature(f) {
				r.meta.Features = append(r.meta.Features, f)
			}
			if err := r.parseFeature(f, p[body:body+l], int64(base+body)); err != nil {
				r.warn(fmt.Errorf("early feature %s: %w", f.String(), err))
			}
		}
		off = body + (l+7)/8*8
	}
	return true
}

// writeUnfinishedHeader flushes what NewWriter wrote and puts a header with
// data size 0 and no features in place of the placeholder: what perf itself
// leaves until it finishes, and what Reader takes as "read the records up
// to the end of the file".
func (w *Writer) writeUnfinishedHeader() {
	if w.err == nil {
		w.err = w.bw.Flush()
	}
	if w.err == nil {
		_, w.err = w.out.WriteAt(w.fileHeader(0), 0)
	}
}
