package symbolize

import (
	"context"
	"runtime/pprof"
	"sync"
	"sync/atomic"

	"github.com/faultline/faultline/perfdata"
)

// Pipeline delivers a recording's records in the reader's order, like
// perfdata.Reader, with the stack walks of the samples the caller chooses
// done ahead on other goroutines:
//
//	reader goroutine: decode, time order, prewalker.Prepare ─┬→ walkers: walker.Walk, a batch each
//	                                                         └→ caller: Next, in batch order, once
//	                                                            the batch's walks are done
//
// The caller interns the walks (Session.Intern) and does everything else
// that depends on order on its own goroutine, so results are the same
// for any number of walkers. Records travel in batches from a bounded
// pool: memory stays flat in the recording's size. Stacks of a memory
// mapped recording are not copied (perfdata.Reader.Stable); its pages are
// released once every record delivered before the release was consumed
// (perfdata.Reader.DeferDrops).
//
// Only the records a consumer of faultline acts on travel: samples, MMAP,
// COMM, FORK, EXIT, LOST and LOST_SAMPLES (copied: the reader reuses its
// records); the others are skipped.
type Pipeline struct {
	r     *perfdata.Reader
	s     *Session
	walks func(*perfdata.Sample) bool

	free, work, ordered chan *pipeBatch
	stop                chan struct{}
	stopped             bool
	walking             sync.WaitGroup // batches sent to walkers and not walked yet
	done                sync.WaitGroup

	// Page releases of the mapped recording wait for the caller to
	// consume the last batch sent before them (not for a drained
	// pipeline: the reader never waits for one).
	sent      uint64 // batches sent (the reader's)
	dropMu    sync.Mutex
	dropCond  sync.Cond // on dropMu: the pending release ran
	consumed  uint64    // batches consumed (the caller's; under dropMu)
	pending   func()    // the release waiting (under dropMu); nil: none
	pendAfter uint64    // pending runs once batch pendAfter is consumed

	cur *pipeBatch
	pos int
	own *walker // the caller's, for batches no walker goroutine took
}

const (
	batchItems = 512 // records per batch
	batchWalks = 64  // walks per batch: a batch is sent when either fills
	pipeDepth  = 4   // batches per walker in the pool (at least 8)
	// heldGranules is how much of the mapped recording (in 2 MiB
	// granules) is read between releases of its pages.
	heldGranules = 16 // 32 MiB
)

type pipeItem struct {
	rec  perfdata.Record // points to the field below that holds the record
	walk int32           // index into pipeBatch.walks; -1: not walked
	smp  perfdata.Sample
	mmap perfdata.Mmap
	comm perfdata.Comm
	fork perfdata.Fork
	exit perfdata.Exit
	lost perfdata.Lost
	ls   perfdata.LostSamples
	raw  []byte // owned copy of smp.Raw for unstable input
	bid  []byte // owned copy of mmap.BuildID
}

type pipeBatch struct {
	seq    uint64 // 1, 2, ... in the order sent
	items  []pipeItem
	n      int
	walks  []Walk
	nwalks int
	walked chan struct{} // a walker goroutine is done with this batch
	taken  atomic.Bool   // a walker goroutine or the caller took it to walk
}

// NewPipeline starts a pipeline over r with n walkers: n-1 walker
// goroutines and the caller, which walks any batch it needs that no
// walker goroutine has taken yet (so no core waits while work is left);
// walks says which samples to walk (it runs on the reader goroutine).
// The session must not
// Unwind, and the caller must not use r, until the pipeline has ended
// (Next returned false, or Close). Build IDs from r's header are added to
// the session now: walkers read them.
func (s *Session) NewPipeline(r *perfdata.Reader, n int, walks func(*perfdata.Sample) bool) *Pipeline {
	s.AddBuildIDs(r.Meta().BuildIDs)
	n = max(n, 1)
	nb := max(pipeDepth*n, 8)
	nwork := nb
	if n == 1 {
		nwork = 0 // no walker goroutines: nothing sent to work
	}
	p := &Pipeline{r: r, s: s, walks: walks,
		free: make(chan *pipeBatch, nb), work: make(chan *pipeBatch, nwork), ordered: make(chan *pipeBatch, nb),
		stop: make(chan struct{})}
	p.dropCond.L = &p.dropMu
	for range nb {
		p.free <- &pipeBatch{items: make([]pipeItem, batchItems), walks: make([]Walk, batchWalks), walked: make(chan struct{}, 1)}
	}
	pre, walkers := s.newPrewalker(n)
	p.own = walkers[0]
	for _, wk := range walkers[1:] {
		p.done.Add(1)
		go stage("walk", func() {
			defer p.done.Done()
			for b := range p.work {
				if b.taken.CompareAndSwap(false, true) {
					walkBatch(wk, b)
					p.walking.Done()
					b.walked <- struct{}{}
				}
			}
		})
	}
	p.done.Add(1)
	go stage("read", func() {
		defer p.done.Done()
		defer close(p.ordered)
		defer close(p.work)
		p.feed(pre)
	})
	return p
}

func walkBatch(wk *walker, b *pipeBatch) {
	for i := range b.nwalks {
		if i+1 < b.nwalks {
			// The next walk reads its stack from the top: ask for it.
			perfdata.Prefetch(b.walks[i+1].stack, stackPrefetch)
		}
		wk.Walk(&b.walks[i])
	}
}

// stackPrefetch is how much of a stack a walk of a gcc compile reads, most
// of the time: its first kilobyte.
const stackPrefetch = 1024

// await returns once b is walked: by a walker goroutine, or now by the
// caller.
func (p *Pipeline) await(b *pipeBatch) {
	if b.taken.CompareAndSwap(false, true) {
		walkBatch(p.own, b)
		p.walking.Done()
		return
	}
	<-b.walked
}

// stage runs f with the pprof label stage=name: a CPU profile splits by
// stage with -tagfocus=stage=read (or walk, or the caller's own label).
func stage(name string, f func()) {
	pprof.Do(context.Background(), pprof.Labels("stage", name), func(context.Context) { f() })
}

// feed is the reader goroutine: it cuts the records into batches, prepares
// the walks, and sends each batch to a walker and, in order, to the
// caller.
func (p *Pipeline) feed(pre *prewalker) {
	var b *pipeBatch
	// send passes b on; the channels hold every batch there is, so it
	// never blocks.
	send := func() {
		if b == nil {
			return
		}
		p.walking.Add(1)
		p.sent++
		b.seq = p.sent
		b.taken.Store(false)
		if cap(p.work) > 0 {
			p.work <- b
		}
		p.ordered <- b
		b = nil
	}
	r := p.r
	// walkers read stacks and the caller reads payloads from the mapped
	// file after Next moved on: pages are released once every record
	// delivered so far was consumed, by the caller as it consumes the
	// last batch sent, so the reader, the stage that bounds a parallel
	// run, never waits for the pipeline to drain.
	r.DeferDrops(heldGranules, func(drop func()) {
		send()
		p.dropMu.Lock()
		defer p.dropMu.Unlock()
		// At most one release waits: a reader further ahead of the
		// caller would keep more of the file resident.
		for p.pending != nil {
			p.dropCond.Wait()
		}
		if p.consumed >= p.sent {
			drop()
			return
		}
		p.pending, p.pendAfter = drop, p.sent
	})
	defer r.DeferDrops(0, nil)
	for r.Next() {
		rec := r.Record()
		if pre.Changes(rec) && pre.Observe(rec) {
			// Walks prepared from here on see the change. A walker
			// lags far behind the log: once every walk prepared so far
			// is done, catch it up.
			send()
			p.walking.Wait()
			pre.Settle()
		}
		if b == nil {
			select {
			case <-p.stop:
				return
			default:
			}
			select {
			case b = <-p.free:
			case <-p.stop:
				return
			}
			b.n, b.nwalks = 0, 0
		}
		it := &b.items[b.n]
		if !copyItem(it, rec, r.Stable()) {
			continue
		}
		it.walk = -1
		if smp, ok := rec.(*perfdata.Sample); ok && p.walks(smp) {
			it.walk = int32(b.nwalks)
			w := &b.walks[b.nwalks]
			b.nwalks++
			pre.Prepare(smp, w, !r.Stable())
			it.smp.Stack = w.Stack()
		}
		b.n++
		if b.n == len(b.items) || b.nwalks == len(b.walks) {
			send()
		}
	}
	send()
}

// copyItem copies rec into it; false for records that do not travel.
func copyItem(it *pipeItem, rec perfdata.Record, stable bool) bool {
	switch rec := rec.(type) {
	case *perfdata.Sample:
		// The decoded slices (Regs, Callchain, ...) are the reader's: the
		// walk has its own copies; Raw and Stack point into the file.
		it.rec = &it.smp
		it.smp = perfdata.Sample{RecordCommon: rec.RecordCommon, Event: rec.Event,
			IP: rec.IP, Addr: rec.Addr, Period: rec.Period, Raw: rec.Raw, RegsABI: rec.RegsABI, RegsMask: rec.RegsMask,
			StackSize: rec.StackSize, Weight: rec.Weight, DataSrc: rec.DataSrc, Transaction: rec.Transaction,
			PhysAddr: rec.PhysAddr, Cgroup: rec.Cgroup, DataPageSize: rec.DataPageSize, CodePageSize: rec.CodePageSize}
		if !stable && rec.Raw != nil {
			it.raw = append(it.raw[:0], rec.Raw...)
			it.smp.Raw = it.raw
		}
	case *perfdata.Mmap:
		it.mmap, it.rec = *rec, &it.mmap
		if rec.BuildID != nil {
			it.bid = append(it.bid[:0], rec.BuildID...)
			it.mmap.BuildID = it.bid
		}
	case *perfdata.Comm:
		it.comm, it.rec = *rec, &it.comm
	case *perfdata.Fork:
		it.fork, it.rec = *rec, &it.fork
	case *perfdata.Exit:
		it.exit, it.rec = *rec, &it.exit
	case *perfdata.Lost:
		it.lost, it.rec = *rec, &it.lost
	case *perfdata.LostSamples:
		it.ls, it.rec = *rec, &it.ls
	default:
		return false
	}
	return true
}

// Next advances to the next record; false at the end (then see the
// reader's Err and Warnings).
func (p *Pipeline) Next() bool {
	if p.cur != nil {
		p.pos++
		if p.pos < p.cur.n {
			return true
		}
		p.release()
	}
	for {
		b, ok := <-p.ordered
		if !ok {
			p.done.Wait()
			return false
		}
		p.await(b)
		if b.n > 0 {
			p.cur, p.pos = b, 0
			return true
		}
		p.cur = b
		p.release()
	}
}

func (p *Pipeline) release() {
	seq := p.cur.seq
	p.free <- p.cur
	p.cur = nil
	p.dropMu.Lock()
	p.consumed = seq
	var due func()
	if p.pending != nil && p.pendAfter <= seq {
		due, p.pending = p.pending, nil
		p.dropCond.Signal()
	}
	p.dropMu.Unlock()
	if due != nil {
		due()
	}
}

// Record returns the current record, valid until the next call to Next.
// Its slices other than Raw and Stack are nil.
func (p *Pipeline) Record() perfdata.Record {
	return p.cur.items[p.pos].rec
}

// Walk returns the current sample's walk, ready for Session.Intern, or
// nil when it was not walked. Valid until the next call to Next.
func (p *Pipeline) Walk() *Walk {
	it := &p.cur.items[p.pos]
	if it.walk < 0 {
		return nil
	}
	return &p.cur.walks[it.walk]
}

// Close stops the pipeline early (after an error) and waits for its
// goroutines. Not needed after Next returned false.
func (p *Pipeline) Close() {
	if p.stopped {
		return
	}
	p.stopped = true
	close(p.stop)
	if p.cur != nil {
		p.release()
	}
	for b := range p.ordered {
		p.await(b)
		p.cur = b
		p.release()
	}
	p.done.Wait()
}
