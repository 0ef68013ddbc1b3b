package perfdata

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The compressed data section (WriterOptions.Compress). The writer gathers
// whole records into chunks of at most compressedChunk bytes; each chunk
// becomes one zstd frame of its own (no checksum, a window of zblock
// bytes, so blocks of at most zblock), compressed by a pool of encoder
// goroutines while the caller goes on writing records, and the frames are
// written in order, one COMPRESSED record per block.
//
// perf decompresses the COMPRESSED records one at a time with one
// streaming decoder, which moves from one frame to the next by itself,
// and it fails on a record that yields no bytes ("Couldn't decompress
// data") — which a record holding only the middle of a compressed block
// would. A record per block makes every record yield bytes, and a file cut
// short (a recorder killed) loses at most the block it cuts. A block that
// does not fit one record (a zblock-byte block of records that do not
// compress to half) makes the chunk be compressed again in pieces of
// at most zpieceMax bytes, each a frame of one block that fits a record;
// a piece that is one record too large even so is written as it is,
// uncompressed, which perf and Reader read among COMPRESSED records as
// perf's own FINISHED_ROUND records.
//
// The frames' literals are stored without entropy coding: records are
// mostly matches of earlier records, so Huffman coding the few literals
// saves little and would take about half the encoder's time.
//
// With WriterOptions.KeepUp a chunk that would wait behind zlag others for
// an encoder is written uncompressed instead: a recorder that must not
// fall behind the program it records trades file size for time.

const (
	// compressedChunk bounds the bytes of one frame. perf decompresses a
	// record into a buffer of compressMmapLen, which must hold a record's
	// output (at most a chunk) and the unfinished record carried over.
	compressedChunk = 256 << 10
	// zblock is the zstd window, and so the largest block: the records of
	// one COMPRESSED record (see above). zstd's largest: the encoder
	// runs faster with it than with smaller ones.
	zblock = 128 << 10
	// zpieceMax is the largest input of a fallback frame: one block, which
	// even stored raw (zpieceMax + 3 bytes) with its frame header fits
	// maxCompressedPayload.
	zpieceMax = 60 << 10
	// zqueue is how many chunks may wait for compression or writing before
	// the caller waits.
	zqueue = 24
)

// zlag is how many chunks may wait for an encoder, with KeepUp, before the
// next is written uncompressed (a variable for tests).
var zlag = 16

// zjob is one chunk on its way through the pipeline.
type zjob struct {
	in     []byte // whole records
	out    []byte // the records to write: COMPRESSED, or raw ones (own, or in)
	own    []byte // the buffer compressed records are built in
	zbytes int64  // COMPRESSED payload bytes in out
	zin    int64  // the input bytes behind them
	ready  chan struct{}
}

// zpipe is the compression pipeline of a Writer.
type zpipe struct {
	w       *Writer
	opts    []zstd.EOption
	cur     *zjob
	jobs    int // zjobs made so far, at most zqueue+workers+1
	workers int
	work    chan *zjob // to the encoders
	order   chan *zjob // to the output, in the order written
	free    chan *zjob
	done    chan struct{}
	started bool
	stopped bool
	keepUp  bool
	// enc is the first encoder: the first worker's, or finish's own when
	// every record fits one chunk (no goroutines for a short recording).
	enc *zstd.Encoder

	mu  sync.Mutex
	err error // the first write error of the output goroutine
}

func newZpipe(w *Writer, level int, keepUp bool) (*zpipe, error) {
	z := &zpipe{w: w, workers: min(2, runtime.GOMAXPROCS(0)), keepUp: keepUp,
		opts: []zstd.EOption{zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
			zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false), zstd.WithWindowSize(zblock),
			zstd.WithNoEntropyCompression(true)}}
	// An encoder that cannot be made fails here, not in a goroutine.
	enc, err := zstd.NewWriter(nil, z.opts...)
	if err != nil {
		return nil, fmt.Errorf("perfdata: zstd: %w", err)
	}
	z.enc = enc
	z.cur = z.newJob()
	// The encoder takes its buffers and tables on its first block, a few
	// milliseconds of memory touched for the first time: done now, beside
	// the caller (EncodeAll waits for the encoder if a chunk needs it
	// first), rather than when the first chunk waits for it.
	go enc.EncodeAll(make([]byte, 64), nil)
	return z, nil
}

func (z *zpipe) newJob() *zjob {
	z.jobs++
	return &zjob{in: make([]byte, 0, compressedChunk), ready: make(chan struct{}, 1)}
}

// add appends a record given as parts (header and body, or one whole
// record and nil) to the current chunk, handing the chunk on first when
// the record would take it past compressedChunk.
func (z *zpipe) add(head, body []byte) error {
	n := len(head) + len(body)
	if len(z.cur.in) > 0 && len(z.cur.in)+n > compressedChunk {
		if err := z.handOff(); err != nil {
			return err
		}
	}
	z.cur.in = append(z.cur.in, head...)
	z.cur.in = append(z.cur.in, body...)
	return nil
}

// room returns an empty slice at the end of the current chunk with room
// for a record of up to max bytes (handing the chunk on first if it has
// not that room), or nil when no chunk can hold one.
func (z *zpipe) room(max int) ([]byte, error) {
	if max > compressedChunk {
		return nil, nil
	}
	if len(z.cur.in) > 0 && len(z.cur.in)+max > compressedChunk {
		if err := z.handOff(); err != nil {
			return nil, err
		}
	}
	n := len(z.cur.in)
	return z.cur.in[n:n:min(n+max, cap(z.cur.in))], nil
}

// inPlace reports whether rec was built where room put it: right after
// the current chunk's records.
func (z *zpipe) inPlace(rec []byte) bool {
	in := z.cur.in
	return len(rec) > 0 && len(rec) <= cap(in)-len(in) && &rec[0] == &in[len(in):cap(in)][0]
}

// handOff queues the current chunk and takes an empty one.
func (z *zpipe) handOff() error {
	if err := z.failed(); err != nil {
		return err
	}
	if !z.started {
		z.start()
	}
	z.order <- z.cur
	if z.keepUp && len(z.work) >= zlag {
		j := z.cur
		// Written from in as it is: no copy, and no out buffer
		// grown to a chunk's size.
		j.out, j.zbytes, j.zin = j.in, 0, 0
		j.ready <- struct{}{}
	} else {
		z.work <- z.cur
	}
	select {
	case j := <-z.free:
		z.cur = j
	default:
		if z.jobs < z.capacity() {
			z.cur = z.newJob()
		} else {
			z.cur = <-z.free
		}
	}
	z.cur.in = z.cur.in[:0]
	return nil
}

// capacity is how many chunks the pipeline holds at most: those queued,
// one per encoder, and the one being gathered.
func (z *zpipe) capacity() int { return zqueue + z.workers + 1 }

func (z *zpipe) start() {
	z.started = true
	n := z.capacity()
	z.work = make(chan *zjob, n)
	z.order = make(chan *zjob, n)
	z.free = make(chan *zjob, n)
	z.done = make(chan struct{})
	for i := 0; i < z.workers; i++ {
		enc := z.enc
		if i > 0 {
			enc, _ = zstd.NewWriter(nil, z.opts...) // checked by newZpipe
		}
		go func() {
			// The encoder's output, one per encoder rather than per
			// chunk: memory touched for the first time is what a
			// short recording spends much of its time on.
			var frame []byte
			for j := range z.work {
				j.out, j.zbytes, j.zin, frame = appendCompressed(enc, j.in, j.own[:0], frame)
				j.own = j.out
				j.ready <- struct{}{}
			}
		}()
	}
	go z.output()
}

// output writes the chunks' records in order. It alone writes to the
// Writer's target while the pipeline runs.
func (z *zpipe) output() {
	defer close(z.done)
	for j := range z.order {
		<-j.ready
		if z.failed() == nil {
			if err := z.emit(j); err != nil {
				z.mu.Lock()
				z.err = err
				z.mu.Unlock()
			}
		}
		z.free <- j
	}
}

// emit writes a compressed chunk's records to the Writer's target.
func (z *zpipe) emit(j *zjob) error {
	n, err := z.w.bw.Write(j.out)
	z.w.pos += int64(n)
	z.w.zbytes += j.zbytes
	z.w.zin += j.zin
	return err
}

func (z *zpipe) failed() error {
	if !z.started {
		return nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.err
}

// finish compresses and writes what is left and stops the goroutines.
func (z *zpipe) finish() error {
	if !z.started {
		// One chunk in all: compressed here, as a worker would.
		j := z.cur
		if len(j.in) == 0 {
			return nil
		}
		j.out, j.zbytes, j.zin, _ = appendCompressed(z.enc, j.in, j.own[:0], nil)
		return z.emit(j)
	}
	if len(z.cur.in) > 0 {
		if err := z.handOff(); err != nil {
			z.stop()
			return err
		}
	}
	z.stop()
	return z.failed()
}

func (z *zpipe) stop() {
	if !z.started || z.stopped {
		return
	}
	z.stopped = true
	close(z.work)
	close(z.order)
	<-z.done
}

// appendCompressed appends in (whole records) to out as COMPRESSED records
// cut at block boundaries, or, where a block does not fit a record, as
// smaller frames and raw records (see above). It returns out, the
// COMPRESSED payload bytes, the input bytes behind them and the scratch
// buffer.
func appendCompressed(enc *zstd.Encoder, in, out, scratch []byte) ([]byte, int64, int64, []byte) {
	scratch = enc.EncodeAll(in, scratch[:0])
	if o, n, ok := appendFrameRecords(out, scratch); ok {
		return o, n, int64(len(in)), scratch
	}
	var zbytes, zin int64
	for len(in) > 0 {
		// A piece: the records that fit zpieceMax, or one record.
		end := 0
		for end < len(in) {
			size := int(binary.LittleEndian.Uint16(in[end+6:]))
			if end > 0 && end+size > zpieceMax {
				break
			}
			end += size
		}
		scratch = enc.EncodeAll(in[:end], scratch[:0])
		if len(scratch) <= maxCompressedPayload {
			out = appendCompressedRecord(out, scratch)
			zbytes += int64(len(scratch))
			zin += int64(end)
		} else {
			out = append(out, in[:end]...)
		}
		in = in[end:]
	}
	return out, zbytes, zin, scratch
}

// appendFrameRecords appends frame as COMPRESSED records, one per block
// (the frame header goes with the first). It reports false (out
// unchanged) when a block does not fit a record or the frame does not
// parse.
func appendFrameRecords(out, frame []byte) ([]byte, int64, bool) {
	at := zstdFrameHeaderSize(frame)
	if at < 0 {
		return out, 0, false
	}
	start := len(out)
	rec := 0 // where the next record starts in frame
	for last := false; !last; {
		if at+3 > len(frame) {
			return out[:start], 0, false
		}
		h := uint32(frame[at]) | uint32(frame[at+1])<<8 | uint32(frame[at+2])<<16
		last = h&1 != 0
		size := int(h >> 3)
		switch (h >> 1) & 3 {
		case 1: // RLE: one byte stored
			size = 1
		case 3:
			return out[:start], 0, false
		}
		end := at + 3 + size
		if end > len(frame) {
			return out[:start], 0, false
		}
		if end-rec > maxCompressedPayload {
			return out[:start], 0, false // this block alone is too big
		}
		// One record per block: a file cut short loses at most the
		// block it cuts (zblock bytes of records).
		out = appendCompressedRecord(out, frame[rec:end])
		rec, at = end, end
	}
	if at != len(frame) {
		return out[:start], 0, false // a checksum or trailing bytes: not ours
	}
	return out, int64(len(frame)), true
}

// zstdFrameHeaderSize returns the size of the frame header at the start of
// frame (magic included), or -1.
func zstdFrameHeaderSize(frame []byte) int {
	if len(frame) < 5 || binary.LittleEndian.Uint32(frame) != 0xFD2FB528 {
		return -1
	}
	fhd := frame[4]
	n := 5
	single := fhd&0x20 != 0
	if !single {
		n++ // window descriptor
	}
	n += [4]int{0, 1, 2, 4}[fhd&3] // dictionary id
	switch fhd >> 6 {
	case 0:
		if single {
			n++
		}
	case 1:
		n += 2
	case 2:
		n += 4
	case 3:
		n += 8
	}
	if fhd&0x08 != 0 { // reserved bit
		return -1
	}
	return n
}

func appendCompressedRecord(out, payload []byte) []byte {
	var h [8]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(RecordCompressed))
	binary.LittleEndian.PutUint16(h[6:], uint16(8+len(payload)))
	out = append(out, h[:]...)
	return append(out, payload...)
}
