package shim

import (
	"encoding/binary"
	"errors"
	"testing"
)

// fillRing makes a region of one ring of ringBytes, claims it for thread
// 7 of process 7 and fills it with a malloc written whole and a free,
// alternately, as churn's loop has the shim write them; it returns the
// ring and the bytes written.
func fillRing(tb testing.TB, ringBytes int) (*Ring, uint64) {
	tb.Helper()
	r, err := NewRegion(Options{Slots: 1, RingBytes: ringBytes})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	ne := binary.NativeEndian
	base := CtrlBytes
	hdr := r.mem[base : base+RingHeader]
	ne.PutUint32(hdr[offPid:], 7)
	ne.PutUint32(hdr[offTid:], 7)
	ne.PutUint32(r.mem[offSlotState:], slotClaimed)
	rings := r.Rings()
	if len(rings) != 1 {
		tb.Fatalf("%d rings, want 1", len(rings))
	}
	g := rings[0]
	at, t := 0, uint64(1000)
	for i := 0; ; i++ {
		kind, size := KindCall, RecHeader+CallSize
		if i%2 == 1 {
			kind, size = KindFree, RecHeader+FreeSize
		}
		if at+size > len(g.data) {
			break
		}
		rec := g.data[at : at+size]
		ne.PutUint32(rec, uint32(size))
		rec[4], rec[5] = byte(kind), byte(FuncMalloc)
		if kind == KindFree {
			rec[5] = byte(FuncFree)
		}
		t += 40
		ne.PutUint64(rec[8:], t)
		ne.PutUint64(rec[RecHeader+8:], 0x5000+uint64(i%64)*512)
		at += size
	}
	ne.PutUint64(hdr[offHead:], uint64(at))
	return g, uint64(at)
}

// TestRingPeek: Peek reads back the records fillRing wrote, in order,
// and Consume moves past each.
func TestRingPeek(t *testing.T) {
	g, head := fillRing(t, 256<<10)
	var rec Record
	n, last := 0, uint64(1000)
	for {
		ok, err := g.Peek(head, &rec)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		want := uint8(KindCall)
		if n%2 == 1 {
			want = KindFree
		}
		if rec.Kind != want || rec.Time != last+40 || !rec.Valid(0) || rec.Ptr() != 0x5000+uint64(n%64)*512 {
			t.Fatalf("record %d: kind %d, time %d, %d bytes, ptr %#x", n, rec.Kind, rec.Time, len(rec.Body), rec.Ptr())
		}
		last = rec.Time
		g.Consume(&rec)
		n++
	}
	if g.tail != head || n != 2*int(head)/(2*RecHeader+CallSize+FreeSize) {
		t.Errorf("%d records read up to %d of %d", n, g.tail, head)
	}
}

// BenchmarkRingPeek: what reading a record costs the drain (Peek, Valid,
// Consume), per record, from a ring small enough to stay in the cache.
func BenchmarkRingPeek(b *testing.B) {
	g, head := fillRing(b, 256<<10)
	var rec Record
	n := 0
	for b.Loop() {
		ok, err := g.Peek(head, &rec)
		if err != nil {
			b.Fatal(err)
		}
		if !ok {
			g.tail = 0
			continue
		}
		if !rec.Valid(0) {
			b.Fatal("invalid")
		}
		g.Consume(&rec)
		n++
	}
}

// TestRingPeekCorrupt: a record whose size is not a multiple of 8, runs
// past the ring's end or the head, or is too short for its header is an
// ErrCorrupt; a pad is skipped.
func TestRingPeekCorrupt(t *testing.T) {
	g, head := fillRing(t, 256<<10)
	ne := binary.NativeEndian
	first := ne.Uint32(g.data)
	for _, c := range []struct {
		size uint32
		kind uint8
		tail uint64
		ok   bool
	}{
		{size: 12, kind: KindCall},
		{size: 8, kind: KindCall}, // shorter than its header
		{size: 1 << 20, kind: KindCall},
		{size: uint32(head) + 8, kind: KindPad},
		{size: RecHeader + CallSize, kind: KindPad, ok: true},             // skipped: the free after it is read
		{size: 16, kind: KindFree, tail: uint64(len(g.data)) - 8},         // 8 bytes left before the ring's end
		{size: 8, kind: KindPad, tail: uint64(len(g.data)) - 8, ok: true}, // a pad to the end, then offset 0
	} {
		g.tail = c.tail
		at := c.tail & uint64(len(g.data)-1)
		save := ne.Uint64(g.data[at:])
		ne.PutUint32(g.data[at:], c.size)
		g.data[at+4] = c.kind
		var rec Record
		ok, err := g.Peek(head+c.tail, &rec)
		if c.ok != (ok && err == nil) || !c.ok && !errors.Is(err, ErrCorrupt) {
			t.Errorf("size %d, kind %d at %d: %v, %v", c.size, c.kind, at, ok, err)
		}
		ne.PutUint64(g.data[at:], save)
	}
	ne.PutUint32(g.data, first)
}
