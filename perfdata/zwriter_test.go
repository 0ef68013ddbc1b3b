package perfdata

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
	"github.com/klauspost/compress/zstd"
)

// writeMixedEntropy writes a compressed recording of malloc samples whose
// raw payloads are, in turn, compressible (zeros), random (which zstd
// stores raw: blocks of ~128 KiB that fit no COMPRESSED record), and
// random near the u16 record limit (a record too large for any frame that
// fits a COMPRESSED record). It returns the path and the raw payloads.
func writeMixedEntropy(t *testing.T, pipe bool) (string, [][]byte) {
	t.Helper()
	f, path := perftest.Create(t, "z.data")
	events := []WriterEvent{{Name: "fltest_1:malloc", IDs: []uint64{20},
		Attr: Attr{Type: TypeTracepoint, Config: 1234, SamplePeriod: 1, SampleType: wrSampleType, Flags: AttrSampleIDAll}}}
	td := BuildTracingData(4096, []byte(writerHeaderPage), []byte(writerHeaderEvent),
		[]TraceSystem{{Name: "fltest_1", Formats: [][]byte{[]byte(writerMallocFormat)}}})
	feats := &WriterFeatures{TracingData: td, Arch: "x86_64", NrCPUsAvail: 1, NrCPUsOnline: 1}
	opts := &WriterOptions{Compress: true, Level: 1}
	var w *Writer
	var err error
	if pipe {
		w, err = NewPipeWriter(f, events, feats, opts)
	} else {
		w, err = NewWriter(f, events, opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var raws [][]byte
	for i := 0; i < 1200; i++ {
		var n int
		switch {
		case i%300 == 299:
			n = 65535 - 64 // random, one record near the limit
		case i/100%2 == 1:
			n = 2048 + rng.IntN(4096) // random stack-like copies
		default:
			n = 24 + rng.IntN(64)
		}
		raw := make([]byte, n)
		binary.LittleEndian.PutUint16(raw, 1234)
		binary.LittleEndian.PutUint64(raw[16:], uint64(i))
		if n > 100 {
			for k := 24; k < n; k++ {
				raw[k] = byte(rng.Uint32())
			}
		}
		body := writerSample(20, 0x401000, 7, 7, uint64(1000+i), 0, raw)
		if err := w.WriteRecordParts(uint32(RecordSample), MiscUser, body); err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
		if i%50 == 49 {
			if err := w.WriteRecordParts(uint32(RecordFinishedRound), 0, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	feats.SampleTimeFirst, feats.SampleTimeLast = 1000, 1000+1199
	if err := w.Finish(feats); err != nil {
		t.Fatal(err)
	}
	return path, raws
}

// TestWriterIncompressible: data that zstd cannot shrink is written so
// that Reader and perf read every sample back, byte for byte, and no
// COMPRESSED record exceeds the u16 size limit.
func TestWriterIncompressible(t *testing.T) {
	for _, pipe := range []bool{false, true} {
		t.Run("pipe="+strconv.FormatBool(pipe), func(t *testing.T) {
			path, raws := writeMixedEntropy(t, pipe)
			i := eachSample(t, path, func(i int, s *Sample) {
				if i >= len(raws) || !bytes.Equal(s.Raw[:len(raws[i])], raws[i]) {
					t.Fatalf("sample %d: raw payload differs from the one written", i)
				}
			})
			if i != len(raws) {
				t.Fatalf("read %d samples, wrote %d", i, len(raws))
			}
			perf := perftest.LookPerf(t, "compressed files")
			out, stderr := perftest.RunPerf(t, perf, "", "script", "-F", "time,event", "-i", path)
			if strings.Contains(stderr, "decompress") {
				t.Fatalf("perf script could not decompress:\n%s", stderr)
			}
			if n := strings.Count(out, "fltest_1:malloc"); n != len(raws) {
				t.Errorf("perf script printed %d samples, wrote %d\n%s", n, len(raws), stderr)
			}
		})
	}
}

// TestFrameRecordsCutAtBlocks: every COMPRESSED record the writer emits ends
// at the end of a zstd block (so that it decompresses to something) and
// fits the u16 size field; the fallback keeps that true for data zstd
// cannot shrink.
func TestFrameRecordsCutAtBlocks(t *testing.T) {
	path, _ := writeMixedEntropy(t, false)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// perf_file_header: the data section's offset and size at 40 and 48.
	off, size := binary.LittleEndian.Uint64(b[40:]), binary.LittleEndian.Uint64(b[48:])
	data := b[off : off+size]
	var comp, raw int
	// Block ends in the stream of COMPRESSED payloads, by walking the
	// frames; each record's end must be one.
	var stream []byte
	var recEnds []int
	for off := 0; off < len(data); {
		typ := RecordType(binary.LittleEndian.Uint32(data[off:]))
		size := int(binary.LittleEndian.Uint16(data[off+6:]))
		if typ == RecordCompressed {
			comp++
			stream = append(stream, data[off+8:off+size]...)
			recEnds = append(recEnds, len(stream))
		} else {
			raw++
		}
		off += size
	}
	ends := map[int]bool{}
	for at := 0; at < len(stream); {
		n := zstdFrameHeaderSize(stream[at:])
		if n < 0 {
			t.Fatalf("no frame header at stream offset %d", at)
		}
		at += n
		for last := false; !last; {
			hd := uint32(stream[at]) | uint32(stream[at+1])<<8 | uint32(stream[at+2])<<16
			last = hd&1 != 0
			size := int(hd >> 3)
			if (hd>>1)&3 == 1 {
				size = 1
			}
			at += 3 + size
			ends[at] = true
		}
	}
	for i, e := range recEnds {
		if !ends[e] {
			t.Errorf("COMPRESSED record %d ends inside a block (stream offset %d)", i, e)
		}
	}
	if comp == 0 {
		t.Errorf("no COMPRESSED record")
	}
	_ = raw
}

// TestCompressedFallback: a frame with a block too big for one record
// (an encoder with 128 KiB blocks on random bytes) is written as smaller
// frames, and a record too big for any as it is; every COMPRESSED record
// fits the u16 size field, and what the records hold, decompressed in
// order, is the input.
func TestCompressedFallback(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var in []byte
	for _, n := range []int{24, 40000, 65528, 48, 30000, 30000, 30000, 80} {
		rec := make([]byte, n&^7)
		for k := 8; k < len(rec); k++ {
			rec[k] = byte(rng.Uint32())
		}
		binary.LittleEndian.PutUint32(rec, uint32(RecordSample))
		binary.LittleEndian.PutUint16(rec[6:], uint16(len(rec)))
		in = append(in, rec...)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false), zstd.WithWindowSize(1<<17))
	if err != nil {
		t.Fatal(err)
	}
	out, zbytes, zin, _ := appendCompressed(enc, in, nil, nil)
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got, stream []byte
	var raw, comp int
	flush := func() {
		if len(stream) > 0 {
			b, err := dec.DecodeAll(stream, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, stream = append(got, b...), nil
		}
	}
	for off := 0; off < len(out); {
		size := int(binary.LittleEndian.Uint16(out[off+6:]))
		if RecordType(binary.LittleEndian.Uint32(out[off:])) == RecordCompressed {
			comp++
			stream = append(stream, out[off+8:off+size]...)
		} else {
			flush()
			raw++
			got = append(got, out[off:off+size]...)
		}
		off += size
	}
	flush()
	if !bytes.Equal(got, in) {
		t.Fatalf("the records hold %d bytes that differ from the %d written", len(got), len(in))
	}
	if comp == 0 || raw == 0 || zin+int64(raw) == 0 || zbytes == 0 {
		t.Errorf("%d COMPRESSED and %d raw records: the test wants both", comp, raw)
	}
}

// TestWriterKeepUp: chunks written uncompressed because the encoders lag
// (here: always, zlag 0) read back as the compressed ones do, and the
// writer counts them; without KeepUp none is.
func TestWriterKeepUp(t *testing.T) {
	t.Run("keepup", func(t *testing.T) {
		defer func(v int) { zlag = v }(zlag)
		zlag = 0
		writeReadBack(t, &WriterOptions{Compress: true, KeepUp: true}, true)
	})
	t.Run("default", func(t *testing.T) {
		writeReadBack(t, &WriterOptions{Compress: true, Level: 1}, false)
	})
}

// writeReadBack writes 20000 samples with opts and reads them back; raw
// says whether all of them are to be stored uncompressed.
func writeReadBack(t *testing.T, opts *WriterOptions, raw bool) {
	w, path := oneEventWriter(t, "k.data", opts)
	const n = 20000
	for i := 0; i < n; i++ {
		if err := w.WriteRecordParts(uint32(RecordSample), MiscUser, writerSample(1, uint64(i), 3, 3, uint64(i), 0, make([]byte, 24))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(nil); err != nil {
		t.Fatal(err)
	}
	if u := w.UncompressedBytes(); raw && u != w.DataBytes() || !raw && u != 0 {
		t.Errorf("%d of %d bytes written uncompressed; want all: %v", u, w.DataBytes(), raw)
	}
	i := eachSample(t, path, func(i int, s *Sample) {
		if s.IP != uint64(i) {
			t.Fatalf("sample %d has ip %d", i, s.IP)
		}
	})
	if i != n {
		t.Fatalf("read %d of %d samples", i, n)
	}
}

// oneEventWriter starts a recording named name of one tracepoint event
// (id 1, wrSampleType) in the test's directory.
func oneEventWriter(t *testing.T, name string, opts *WriterOptions) (*Writer, string) {
	t.Helper()
	f, path := perftest.Create(t, name)
	w, err := NewWriter(f, []WriterEvent{{Name: "x", IDs: []uint64{1},
		Attr: Attr{Type: TypeTracepoint, SampleType: wrSampleType, Flags: AttrSampleIDAll}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w, path
}

// eachSample reads the recording at path with Reader and calls fn with
// each sample and its index among the samples; it returns how many there
// were and fails t when the file cannot be read to the end.
func eachSample(t *testing.T, path string, fn func(i int, s *Sample)) int {
	t.Helper()
	rd, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	i := 0
	for rd.Next() {
		if s, ok := rd.Record().(*Sample); ok {
			fn(i, s)
			i++
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("after %d samples: %v", i, err)
	}
	return i
}

// TestRecordBuffer: samples built in RecordBuffer's slice read back as
// written, compressed and not: most built in place, every 100th grown
// past the max it asked for (so copied), between them ones written with
// WriteRecordParts.
func TestRecordBuffer(t *testing.T) {
	for _, compress := range []bool{false, true} {
		w, path := oneEventWriter(t, "rb.data", &WriterOptions{Compress: compress})
		const n = 30000 // over 256 KiB chunks' worth
		for i := 0; i < n; i++ {
			body := writerSample(1, uint64(i), 3, 3, uint64(i), 0, make([]byte, 24))
			if i%7 == 3 {
				if err := w.WriteRecordParts(uint32(RecordSample), MiscUser, body); err != nil {
					t.Fatal(err)
				}
				continue
			}
			max := 8 + len(body)
			if i%100 == 0 {
				max = 8 // the record outgrows it
			}
			b := append(w.RecordBuffer(max), make([]byte, 8)...)
			b = append(b, body...)
			if err := w.CommitRecord(uint32(RecordSample), MiscUser, b); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Finish(nil); err != nil {
			t.Fatal(err)
		}
		got := eachSample(t, path, func(i int, s *Sample) {
			if s.IP != uint64(i) {
				t.Fatalf("compress %v: sample %d has ip %d", compress, i, s.IP)
			}
		})
		if got != n {
			t.Fatalf("compress %v: read %d of %d samples", compress, got, n)
		}
	}
}
