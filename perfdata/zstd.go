package perfdata

import (
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// perf record -z does not compress each COMPRESSED record on its own: it
// keeps one zstd stream open for the whole recording (per mmap) and flushes
// it at the end of each record (tools/perf/util/zstd.c,
// zstd_compress_stream_to_records). Only the first record starts with the
// zstd magic, and a record's data decodes only after all earlier ones.
// Decoding therefore needs a streaming decoder fed record by record.
//
// klauspost/compress's Decoder pulls its input through an io.Reader, so it
// runs in its own goroutine and asks for the next record's data over a
// channel. With concurrency 1 the decoder decodes synchronously inside
// Read and, having returned data, asks for input again only when a Read
// starts with nothing buffered; so when it asks, everything the previous
// input produced has been handed over.

// maxDecompressed caps the output of one COMPRESSED record. perf fills at
// most one mmap buffer (comp_mmap_len, 512 KiB by default) per record.
const maxDecompressed = 64 << 20

var errDecompressedTooBig = errors.New("decompressed data of one record exceeds 64 MiB")

type zevent struct {
	data []byte
	need bool
	err  error
}

type zstdStream struct {
	in      chan []byte
	ev      chan zevent
	ack     chan struct{}
	started bool
	waiting bool // the decoder goroutine is blocked asking for input
	done    bool
	err     error
}

func (z *zstdStream) run() {
	defer close(z.ev)
	rd := &zchanReader{z: z}
	dec, err := zstd.NewReader(rd,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(1<<30),
		zstd.WithDecoderMaxWindow(1<<28))
	if err != nil {
		z.ev <- zevent{err: err}
		return
	}
	defer dec.Close()
	buf := make([]byte, 128<<10)
	for {
		n, err := dec.Read(buf)
		if n > 0 {
			z.ev <- zevent{data: buf[:n]}
			if _, ok := <-z.ack; !ok {
				return
			}
		}
		if err != nil {
			z.ev <- zevent{err: err}
			return
		}
	}
}

type zchanReader struct {
	z   *zstdStream
	cur []byte
}

func (c *zchanReader) Read(p []byte) (int, error) {
	if len(c.cur) == 0 {
		c.z.ev <- zevent{need: true}
		c.cur = <-c.z.in
		if len(c.cur) == 0 {
			return 0, io.EOF
		}
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// pump collects output until the decoder asks for input or fails.
func (z *zstdStream) pump(dst []byte, limit int) ([]byte, error) {
	for {
		e, ok := <-z.ev
		if !ok {
			z.done = true
			if z.err == nil {
				z.err = io.ErrUnexpectedEOF
			}
			return dst, z.err
		}
		switch {
		case e.need:
			z.waiting = true
			return dst, nil
		case e.err != nil:
			z.err = e.err
			z.done = true
			for range z.ev {
			}
			return dst, z.err
		default:
			if len(dst)+len(e.data) > limit {
				z.err = errDecompressedTooBig
				z.done = true
				close(z.ack)
				for range z.ev {
				}
				return dst, z.err
			}
			dst = append(dst, e.data...)
			z.ack <- struct{}{}
		}
	}
}

// feed decompresses the next piece of the stream, appending to dst.
func (z *zstdStream) feed(chunk, dst []byte, limit int) ([]byte, error) {
	if z.done {
		return dst, z.err
	}
	if len(chunk) == 0 {
		return dst, nil
	}
	if !z.started {
		z.in = make(chan []byte)
		z.ev = make(chan zevent)
		z.ack = make(chan struct{})
		z.started = true
		go z.run()
	}
	var err error
	if !z.waiting {
		if dst, err = z.pump(dst, limit); err != nil {
			return dst, err
		}
	}
	z.waiting = false
	z.in <- chunk
	return z.pump(dst, limit)
}

// close stops the decoder goroutine.
func (z *zstdStream) close() {
	if !z.started || z.done {
		return
	}
	z.done = true
	if z.waiting {
		z.in <- nil
	}
	for e := range z.ev {
		if e.data != nil {
			z.ack <- struct{}{}
		}
		if e.need {
			z.in <- nil
		}
	}
}

func zstdError(off int64, err error) error {
	return &FormatError{Offset: off, Msg: "zstd: cannot decompress COMPRESSED record", Err: fmt.Errorf("%w", err)}
}
