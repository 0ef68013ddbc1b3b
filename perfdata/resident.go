package perfdata

import (
	"context"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
)

// granule bounds what touching one byte of a file mapping can make
// resident: a read fault maps the whole page-cache folio holding the byte
// (ext4 on Linux 6.x caches files in folios of up to 2 MiB, the PMD size)
// or, for small folios, the pages around it (fault_around_bytes, 64 KiB).
// Neither crosses a 2 MiB boundary.
const granule = 2 << 20

// maxGranules is how many distinct granules may be touched before their
// pages are handed back: the mapped part of the recording stays below
// (maxGranules+1)·2 MiB.
const maxGranules = 8

// residency keeps the resident part of a memory-mapped recording bounded.
//
// Every page of the mapping we touch counts in the process's RSS until it
// is unmapped, so without help a 2 GB recording makes a 2 GB process.
// Records are only slices of the mapping, and the records of the two rounds
// that time ordering buffers may span a few hundred MB (perf writes a round
// per pass over its per-CPU buffers: up to -m bytes per CPU), delivered
// hopping between the CPUs' parts of a round. So instead of copying or
// tracking each record, the pages of everything touched since the last
// drop are released with MADV_DONTNEED once maxGranules granules were
// touched. On a read-only file mapping that only removes the page-table
// entries: the data stays in the page cache and a later read of a buffered
// record faults it back in (a minor fault). So no record is ever
// invalidated, whatever is dropped.
type residency struct {
	mapping []byte // the whole file mapping (page aligned); nil: not a mapping we own
	lo, hi  int64  // file offsets touched since the last drop
	gran    [maxHeldGranules]int64
	n       int  // granules in gran
	full    bool // a touch needed one more granule: drop at the next chance
	drops   int
	// limit is the granules held before a drop (maxGranules when 0);
	// deferTo, when set, is handed each drop to run later (Reader.DeferDrops).
	limit   int
	deferTo func(drop func())
	pager   *pager // nil: page-table work on the reader's goroutine
	paged   bool   // pager chosen
}

// touch notes that [off, off+n) of the file was read.
func (d *residency) touch(off int64, n int) {
	if d.mapping == nil || n <= 0 {
		return
	}
	end := off + int64(n)
	if d.n == 0 || off < d.lo {
		d.lo = off
	}
	if end > d.hi {
		d.hi = end
	}
	for g := off / granule; g <= (end-1)/granule; g++ {
		d.add(g)
	}
}

func (d *residency) add(g int64) {
	for _, x := range d.gran[:d.n] {
		if x == g {
			return
		}
	}
	limit := d.limit
	if limit == 0 {
		limit = maxGranules
	}
	if d.n == limit {
		d.full = true
		return
	}
	d.gran[d.n] = g
	d.n++
	if !d.paged {
		d.paged = true
		if runtime.GOMAXPROCS(0) > 1 {
			d.pager = newPager()
		}
	}
	if d.pager != nil {
		d.pager.want(d.mapping, g+1)
	}
}

// release drops b, on the pager when there is one.
func (d *residency) release(b []byte) {
	if d.mapping == nil {
		return // closed: b may be unmapped, its addresses reused
	}
	if d.pager != nil {
		d.pager.release(b)
	} else {
		dropPages(b)
	}
}

// stop ends the pager; call it before unmapping.
func (d *residency) stop() {
	if d.pager != nil {
		d.pager.stop()
		d.pager = nil
	}
}

// maybeDrop releases the touched pages once enough granules were touched.
// Call it between records (the current record stays valid in any case).
func (d *residency) maybeDrop() {
	if !d.full {
		return
	}
	lo := d.lo &^ (granule - 1) // the mapping starts at a page (and granule) boundary
	hi := min(d.hi, int64(len(d.mapping)))
	if lo < hi {
		if b := d.mapping[lo:hi]; d.deferTo != nil {
			d.deferTo(func() { d.release(b) })
		} else {
			d.release(b)
		}
		d.drops++
	}
	d.n, d.full, d.lo, d.hi = 0, false, 0, 0
}

// pager does the page-table work of a file mapping on a goroutine of its
// own, off the decoding goroutine (on a 6.8 GB recording the reader's
// page faults and releases were a third of its time, and the reader is
// the stage that bounds a parallel analyze):
//   - ahead: when the reader enters a granule it asks for the next one to
//     be mapped (populatePages), so its first touch of a page does not
//     fault. Requests are dropped, never waited for, when the pager is
//     behind.
//   - release: drops (dropPages) run there in the order asked.
//
// A granule mapped ahead after a release that covered it would stay
// resident (nothing releases it again): after mapping one, the pager
// releases it again if a release ran meanwhile. Releasing pages of a
// read-only file mapping never invalidates data, it only costs a fault.
// Used only with more than one P: on one core it is only overhead.
type pager struct {
	ahead    chan []byte
	mu       sync.Mutex
	releases [][]byte
	wake     chan struct{}
	done     chan struct{}
	gen      atomic.Uint64 // releases done
	next     int64         // first granule not asked ahead yet
}

const maxQueuedReleases = 2

func newPager() *pager {
	p := &pager{ahead: make(chan []byte, 2), wake: make(chan struct{}, 1), done: make(chan struct{})}
	// Labelled for CPU profiles (it would inherit its starter's labels).
	go pprof.Do(context.Background(), pprof.Labels("stage", "page"), func(context.Context) { p.run() })
	return p
}

func (p *pager) run() {
	defer close(p.done)
	ahead, wake := p.ahead, p.wake
	for ahead != nil || wake != nil {
		select {
		case b, ok := <-ahead:
			if !ok {
				ahead = nil
				continue
			}
			gen := p.gen.Load()
			populatePages(b)
			if p.gen.Load() != gen {
				dropPages(b)
			}
		case _, ok := <-wake:
			p.mu.Lock()
			rs := p.releases
			p.releases = nil
			p.mu.Unlock()
			for _, b := range rs {
				dropPages(b)
				p.gen.Add(1)
			}
			if !ok {
				wake = nil
			}
		}
	}
}

// want asks for granule g of mapping to be mapped, once.
func (p *pager) want(mapping []byte, g int64) {
	if g < p.next || g*granule >= int64(len(mapping)) {
		return
	}
	p.next = g + 1
	select {
	case p.ahead <- mapping[g*granule : min((g+1)*granule, int64(len(mapping)))]:
	default:
	}
}

// release queues a drop of b; any goroutine may call it until stop. With
// maxQueuedReleases queued already (the pager gets no core) the caller
// drops b itself: what is resident stays bounded.
func (p *pager) release(b []byte) {
	p.mu.Lock()
	if len(p.releases) >= maxQueuedReleases {
		p.mu.Unlock()
		dropPages(b)
		p.gen.Add(1)
		return
	}
	p.releases = append(p.releases, b)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// stop runs the queued releases and waits for the goroutine: the
// mapping may be unmapped after.
func (p *pager) stop() {
	close(p.ahead)
	close(p.wake)
	<-p.done
}
