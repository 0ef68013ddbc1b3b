package perfdata

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/faultline/faultline/perfdata/perftest"
)

// The crafted inputs come from testdata/crafted/gen.py (see its README).
const craftedDir = "../testdata/crafted/"

func readCrafted(t testing.TB, name string) []byte {
	t.Helper()
	p, err := os.ReadFile(craftedDir + name)
	if err != nil {
		t.Fatalf("crafted input missing (regenerate with testdata/crafted/gen.sh): %v", err)
	}
	return p
}

// queueWatch reads r to the end in time order and returns the largest
// queue footprint and pinned arena bytes seen after any Next.
func queueWatch(r *Reader) (records int, maxQueued, maxLive int64) {
	for r.Next() {
		records++
		maxQueued = int64(r.Stats().QueuePeak)
		maxLive = max(maxLive, r.src.arena.live)
	}
	return
}

// zbomb.data expands to 1.25 GiB of samples at one time without a
// FINISHED_ROUND: the queue must stay within its bound while the reader
// decodes. The inflate-ratio guard would stop it in the first 4 MiB
// (TestInflateRatioBoundsWork): here it is off, and MaxInflated stops it
// at 1 GiB with a clear error.
func TestQueueBoundZbomb(t *testing.T) {
	if os.Getenv("FAULTLINE_CHILD") == "zbomb" {
		r, err := Open(craftedDir+"zbomb.data", &Options{MaxInflateRatio: -1, MaxInflated: 1 << 30})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(3)
		}
		n, q, live := queueWatch(r)
		fmt.Printf("records=%d flushes=%d maxqueued=%d maxlive=%d\nerr=%v\n", n, r.Stats().QueueFlushes, q, live, r.Err())
		os.Exit(0)
	}
	readCrafted(t, "zbomb.data")
	out, rss, took := perftest.RunChild(t, "TestQueueBoundZbomb", "zbomb")
	t.Logf("%s(max RSS %d MiB, %v)", out, rss>>20, took)
	var n, flushes, q, live int64
	if _, err := fmt.Sscanf(out, "records=%d flushes=%d maxqueued=%d maxlive=%d", &n, &flushes, &q, &live); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	// The queue flushes when a record takes it past the bound: it holds
	// at most the bound plus that record (4152 bytes and its entry).
	if flushes == 0 || q > DefaultQueueSize+4152+qentCost || live > DefaultQueueSize+maxChunkSize {
		t.Errorf("queue not bounded: %d forced flushes, at most %d bytes queued (bound %d), %d bytes of chunks pinned", flushes, q, DefaultQueueSize, live)
	}
	// The limit trips at 1 GiB of work: 1 GiB less what the last
	// COMPRESSED record left uncut (at most maxDecompressed) was
	// delivered first, in 4152-byte samples charged 4152+256 bytes each,
	// fewer than the 315684 in the file.
	if lo := int64(1<<30-maxDecompressed) / (4152 + recordCharge); n < lo || n >= 315684 {
		t.Errorf("%d records delivered, want between %d and 315683", n, lo)
	}
	if !strings.Contains(out, "compressed records expand to more than 1024 MiB in all") {
		t.Errorf("no clear error about the expansion in %q", out)
	}
	if rss > 1<<30 || took > 60*time.Second {
		t.Errorf("max RSS %d MiB, %v: want under 1 GiB and 60 s", rss>>20, took)
	}
}

// MaxInflated caps the total a file may inflate to, whatever the ratio.
func TestMaxInflated(t *testing.T) {
	p := readCrafted(t, "zbomb.data")
	r, err := New(bytes.NewReader(p), int64(len(p)), &Options{MaxInflated: 100 << 20, MaxInflateRatio: -1, Order: FileOrder})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n, _, _ := queueWatch(r)
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "more than 100 MiB in all") {
		t.Fatalf("err = %v, want the 100 MiB limit named", err)
	}
	// Each COMPRESSED record of zbomb.data holds 4 KiB of a stream that
	// expands ~10800×, i.e. ~44 MB: the limit trips in the third record,
	// after two records' worth of 4152-byte samples (~21k) at most.
	if n == 0 || n > 3*(44<<20)/4152 {
		t.Errorf("%d records before the limit", n)
	}
}

// TestInflateRatioBoundsWork: by default, what compressed records expand
// to, counting each record 256 bytes more than it holds, stays within
// inflateFloor plus DefaultMaxInflateRatio times the compressed bytes,
// and the reader stops with a clear error where a file goes past it:
// zbomb.data (4152-byte samples, ~10800×) and roundbomb.data (a GiB of
// 8-byte FINISHED_ROUND records from 90 KB: reading it whole took 32 s).
func TestInflateRatioBoundsWork(t *testing.T) {
	for _, name := range []string{"zbomb.data", "roundbomb.data"} {
		p := readCrafted(t, name)
		r, err := New(bytes.NewReader(p), int64(len(p)), &Options{Order: FileOrder})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		start := time.Now()
		for r.Next() {
			n++
		}
		took := time.Since(start)
		work := r.src.inflated // bytes inflated plus recordCharge a record
		r.Close()
		if err := r.Err(); err == nil || !strings.Contains(err.Error(), "corrupt or crafted") {
			t.Errorf("%s: err = %v, want the inflate ratio named", name, err)
		}
		// The error is set once the work passes the limit: by one record.
		if limit := int64(inflateFloor) + DefaultMaxInflateRatio*int64(len(p)) + recordCharge + 1; work > limit {
			t.Errorf("%s: %d bytes of work from %d bytes, more than %d", name, work, len(p), limit)
		}
		t.Logf("%s: %d bytes, %d records delivered, %d bytes of work, %v", name, len(p), n, work, took)
	}
}

// endlessPipe repeats the sample block of endless.data (64 samples whose
// times fall from 64 µs to 1 µs) blocks times after its header.
type endlessPipe struct {
	head, block []byte
	blocks      int
	pos         int
}

func newEndlessPipe(t testing.TB, blocks int) *endlessPipe {
	p := readCrafted(t, "endless.data")
	attrEnd := pipeHeaderSize + int(p[pipeHeaderSize+6]) | int(p[pipeHeaderSize+7])<<8
	return &endlessPipe{head: p[:attrEnd], block: p[attrEnd:], blocks: blocks}
}

func (e *endlessPipe) Read(b []byte) (int, error) {
	if len(e.head) > 0 {
		n := copy(b, e.head)
		e.head = e.head[n:]
		return n, nil
	}
	if e.blocks == 0 {
		return 0, io.EOF
	}
	n := copy(b, e.block[e.pos:])
	e.pos += n
	if e.pos == len(e.block) {
		e.pos = 0
		e.blocks--
	}
	return n, nil
}

// An endless pipe without FINISHED_ROUND: memory stays at the bound, every
// record is delivered, and those that arrive after a later time was
// flushed are counted.
func TestQueueBoundEndlessPipe(t *testing.T) {
	const blocks = 20000 // 1.28M samples, 51 MB
	const bound = 1 << 20
	r, err := NewStream(newEndlessPipe(t, blocks), &Options{QueueSize: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n, q, live := queueWatch(r)
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	st := r.Stats()
	if n != 1+blocks*64 || st.Samples != blocks*64 {
		t.Errorf("%d records (%d samples) delivered, want the ATTR and %d samples", n, st.Samples, blocks*64)
	}
	if q > bound+40+qentCost || live > bound+maxChunkSize {
		t.Errorf("at most %d bytes queued and %d pinned, bound %d", q, live, bound)
	}
	// Each queued sample costs 40 bytes in its arena chunk plus qentCost;
	// the queue flushes to half the bound when full, i.e. about every
	// bound/2/cost records, flushing whole blocks' worth of times (all
	// times <= the limit). Every block repeats times 1..64 µs, so after a
	// flush at limit L, every later record with time < L arrives out of
	// order: most of them. Without flushes (or with an unbounded queue)
	// none would be.
	cost := 40 + qentCost
	wantFlushes := uint64(blocks*64) * uint64(cost) / (bound / 2)
	if st.QueueFlushes < wantFlushes/2 || st.QueueFlushes > 2*wantFlushes {
		t.Errorf("%d forced flushes, want about %d (records×%d bytes / half the bound)", st.QueueFlushes, wantFlushes, cost)
	}
	if st.Unordered == 0 || st.Unordered >= st.Samples {
		t.Errorf("%d of %d records counted out of order", st.Unordered, n)
	}
	ws := fmt.Sprint(r.Warnings())
	if !strings.Contains(ws, "time-order queue reached its bound (1 MiB)") || !strings.Contains(ws, "delivered out of time order") {
		t.Errorf("warnings %s", ws)
	}
	t.Logf("%d records, %d flushes, %d unordered, max %d queued", n, st.QueueFlushes, st.Unordered, q)
}

// Steady state: once the queue is at its bound, reading more of an endless
// pipe allocates nothing per record.
func TestQueueBoundNoAllocs(t *testing.T) {
	e := newEndlessPipe(t, 1<<30)
	r, err := NewStream(e, &Options{QueueSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 200000 {
		r.Next()
	}
	allocs := testing.AllocsPerRun(5, func() {
		for range 100000 {
			if !r.Next() {
				t.Fatal(r.Err())
			}
		}
	})
	if allocs > 0 {
		t.Errorf("%v allocations per 100000 records at the queue bound", allocs)
	}
}
