package recorder

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/faultline/faultline/perfdata"
	"golang.org/x/sys/unix"
)

// fakeRing is a ring over ordinary memory laid out as the kernel lays out
// a mapping (perf_event_open(2) "MMAP layout"): the metadata page, then a
// 64-byte data area, where put writes records as the kernel does, at
// data_head modulo the size.
func fakeRing(t *testing.T) (*ring, func(typ uint32, misc uint16, body []byte)) {
	pg := os.Getpagesize()
	mem := make([]byte, pg+64)
	meta := (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
	r := &ring{size: 64, meta: meta, data: mem[pg:]}
	put := func(typ uint32, misc uint16, body []byte) {
		var buf [64]byte
		binary.NativeEndian.PutUint32(buf[0:], typ)
		binary.NativeEndian.PutUint16(buf[4:], misc)
		binary.NativeEndian.PutUint16(buf[6:], uint16(8+len(body)))
		rec := buf[:8+copy(buf[8:], body)]
		for i, b := range rec {
			r.data[(meta.Data_head+uint64(i))%64] = b
		}
		meta.Data_head += uint64(len(rec))
	}
	return r, put
}

func TestRingRead(t *testing.T) {
	r, put := fakeRing(t)
	var raw rawRecord
	if r.read(&raw) {
		t.Fatal("an empty ring gave a record")
	}
	a := bytes.Repeat([]byte{0xa}, 32)
	b := bytes.Repeat([]byte{0xb}, 16)
	c := []byte("0123456789abcdef01234567") // 32 bytes with its header: wraps at 56
	put(uint32(perfdata.RecordSample), 2, a)
	put(uint32(perfdata.RecordMmap2), 0, b)
	for i, want := range []struct {
		typ  perfdata.RecordType
		misc uint16
		body []byte
	}{{perfdata.RecordSample, 2, a}, {perfdata.RecordMmap2, 0, b}} {
		if !r.read(&raw) || raw.Header.Type != want.typ || raw.Header.Misc != want.misc ||
			int(raw.Header.Size) != 8+len(want.body) || !bytes.Equal(raw.Data, want.body) {
			t.Fatalf("record %d: %+v", i, raw)
		}
	}
	if r.read(&raw) || r.meta.Data_tail != 64 {
		t.Fatalf("after two records: read more, or data_tail %d, want 64 (40+24 bytes)", r.meta.Data_tail)
	}
	// Two more records fill the data area up to 56, so that the next,
	// of 32 bytes, wraps: 8 bytes at the end, 24 at the start.
	put(uint32(perfdata.RecordComm), 0, make([]byte, 24)) // 64..96: data 0..32
	put(uint32(perfdata.RecordComm), 0, make([]byte, 16)) // 96..120: data 32..56
	for i := range 2 {
		if !r.read(&raw) {
			t.Fatalf("record %d of two not read", i)
		}
	}
	put(uint32(perfdata.RecordSample), 1, c) // 120..152: data 56..64, then 0..24
	if !r.read(&raw) || raw.Header.Type != perfdata.RecordSample || !bytes.Equal(raw.Data, c) {
		t.Fatalf("wrapped record: %+v %q", raw.Header, raw.Data)
	}
	if r.read(&raw) || r.meta.Data_tail != 152 {
		t.Fatalf("data_tail %d, want 152", r.meta.Data_tail)
	}
	// A size the kernel never writes (below the header's) skips what is
	// there instead of reading it as records, and counts the 16 bytes.
	r.data[152%64+6] = 4
	r.meta.Data_head += 16
	if r.read(&raw) || r.tail != r.meta.Data_head || r.meta.Data_tail != r.meta.Data_head || r.skipped != 16 {
		t.Fatalf("corrupt record: tail %d, head %d, skipped %d (want 16)", r.tail, r.meta.Data_head, r.skipped)
	}
}

// TestRingReadAllocs: reading, wrapped records included, allocates
// nothing once the wrap buffer has its size.
func TestRingReadAllocs(t *testing.T) {
	r, put := fakeRing(t)
	var raw rawRecord
	body := make([]byte, 16)
	// 8 records of 24 bytes go round the 64-byte ring three times, each
	// round with one record that wraps.
	n := testing.AllocsPerRun(100, func() {
		for range 8 {
			put(uint32(perfdata.RecordSample), 0, body)
			if !r.read(&raw) {
				t.Fatal("no record")
			}
		}
	})
	if n > 0 {
		t.Errorf("%.1f allocations per record", n)
	}
}

// TestPoller drives the poller with an eventfd in place of a ring owner:
// like a perf event whose task has exited (EPOLLHUP), it stays ready once
// written. Each write is one wakeup, reported once (edge-triggered), not
// on every wait while the descriptor stays ready.
func TestPoller(t *testing.T) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	p, err := newPoller([]*ring{{fd: efd}})
	if err != nil {
		t.Fatal(err)
	}
	one := binary.NativeEndian.AppendUint64(nil, 1)
	for i := range 2 {
		if _, err := unix.Write(efd, one); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.wake:
		case <-time.After(5 * time.Second):
			t.Fatalf("write %d: no wakeup", i)
		}
		// Still readable (nobody reads the eventfd), yet not reported again.
		select {
		case <-p.wake:
			t.Fatalf("write %d: a second wakeup without a new write", i)
		case <-time.After(100 * time.Millisecond):
		}
	}
	done := make(chan struct{})
	go func() {
		p.close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not end the wait")
	}
}
