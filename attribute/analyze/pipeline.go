package analyze

import (
	"context"
	"runtime"
	"runtime/pprof"
	"sync"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
)

// The pipeline (issue 13) runs a file-mode recording on all cores:
//
//	reader goroutine: decode, time order, prepare walks  ─┬→ walkers: unwind a batch each
//	                                                      └→ this goroutine: in batch order,
//	                                                         wait for the batch's walks, then
//	                                                         intern, track, build the profile
//
// Records travel in batches of a bounded pool, so memory stays flat: at
// most pipeDepth batches are in flight. Stacks are not copied when the
// recording is memory mapped (perfdata.Reader.Stable). The tracker, the
// interning of stacks and everything else that hands out IDs or depends
// on order runs on one goroutine in record order, so the profile is the
// same for any number of walkers.

const (
	batchItems = 512 // records per batch
	batchWalks = 128 // walks per batch: a batch is sent when either fills
	pipeDepth  = 4   // batches in flight per walker (at least 8)
	// heldGranules is how much of the mapped recording (in 2 MiB
	// granules) stays resident between the pipeline's drains: before the
	// reader releases pages, every record delivered so far is consumed.
	heldGranules = 32
)

// Item kinds: the records the run acts on (handle, observe). Others are
// no-ops to the run and are not passed on; a record type that observe
// learns to use must be added here.
const (
	itemSample = iota
	itemMmap
	itemComm
	itemFork
	itemExit
	itemLost
	itemLostSamples
)

type pipeItem struct {
	kind uint8
	walk int32 // index into batch.walks; -1: not walked
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
	items  []pipeItem
	n      int
	walks  []symbolize.Walk
	nwalks int
	walked chan struct{} // the walker is done with this batch
	offset int64         // file offset of the last record, for progress
}

// workers is how many walkers a run uses.
func (o *Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// pipeline runs the records through the pipeline. ok is false when the
// recording is not one it takes (pipe mode, or events whose roles are
// found only from their samples): the caller then runs serially.
func (ru *run) pipeline() (ok bool, err error) {
	n := ru.opts.workers()
	if n <= 1 || ru.r.Meta().PipeMode || len(ru.r.Events()) == 0 {
		return false, nil
	}
	if err := ru.setup(); err != nil {
		return false, nil // the serial run reports it where it always has
	}
	walkEv := make([]bool, len(ru.infos))
	for i, in := range ru.infos {
		if in.guess {
			return false, nil
		}
		walkEv[i] = walks(in)
	}
	// The run proper starts at the first sample, as in the serial run:
	// records before it (an exec, say) reach no tracker.
	ru.tr, ru.b = nil, nil

	// Walkers read the build IDs: add them now, not at the first sample.
	ids := ru.r.Meta().BuildIDs
	ru.sess.AddBuildIDs(ids)
	ru.nBuildIDs = len(ids)
	pre, walkers := ru.sess.NewPrewalker(n)
	nb := max(pipeDepth*n, 8)
	free := make(chan *pipeBatch, nb)
	for range nb {
		free <- &pipeBatch{items: make([]pipeItem, batchItems), walks: make([]symbolize.Walk, batchWalks), walked: make(chan struct{}, 1)}
	}
	work := make(chan *pipeBatch, nb)
	ordered := make(chan *pipeBatch, nb)
	stop := make(chan struct{})
	var walking sync.WaitGroup  // batches sent to walkers and not yet walked
	var inflight sync.WaitGroup // batches sent and not yet consumed
	var done sync.WaitGroup
	for _, wk := range walkers {
		done.Add(1)
		go stage("walk", func() {
			defer done.Done()
			for b := range work {
				for i := range b.nwalks {
					wk.Walk(&b.walks[i])
				}
				walking.Done()
				b.walked <- struct{}{}
			}
		})
	}
	done.Add(1)
	go stage("read", func() {
		defer done.Done()
		defer close(ordered)
		defer close(work)
		ru.feed(pre, walkEv, free, work, ordered, stop, &walking, &inflight)
	})

	var herr error
	stage("track", func() {
		herr = ru.drain(ordered, free, stop, &inflight)
	})
	done.Wait()
	ru.walk = nil
	return true, herr
}

// stage runs f with the pprof label stage=name: a CPU profile of a run
// (analyze --cpuprofile) splits by stage with -tagfocus=stage=track.
func stage(name string, f func()) {
	pprof.Do(context.Background(), pprof.Labels("stage", name), func(context.Context) { f() })
}

// drain is the consumer: it feeds the batches to the run in order.
func (ru *run) drain(ordered, free chan *pipeBatch, stop chan struct{}, inflight *sync.WaitGroup) error {
	var herr error
	for b := range ordered {
		<-b.walked
		if herr == nil {
			herr = ru.consume(b)
			if herr != nil {
				close(stop)
			}
		}
		if ru.opts.Progress != nil {
			ru.opts.Progress(b.offset)
		}
		free <- b
		inflight.Done()
	}
	return herr
}

// feed is the reader goroutine: it cuts the records into batches, prepares
// the walks of the samples the run will unwind, and sends each batch to a
// walker and, in order, to the consumer.
func (ru *run) feed(pre *symbolize.Prewalker, walkEv []bool, free, work, ordered chan *pipeBatch, stop chan struct{}, walking, inflight *sync.WaitGroup) {
	var b *pipeBatch
	// send passes b on; the channels hold every batch there is, so it
	// never blocks.
	send := func() {
		if b == nil {
			return
		}
		walking.Add(1)
		inflight.Add(1)
		work <- b
		ordered <- b
		b = nil
	}
	r := ru.r
	// Walkers read stacks and the consumer reads payloads from the mapped
	// file after Next moved on: the pages stay until both are done.
	r.HoldPages(heldGranules, func() {
		send()
		inflight.Wait()
	})
	defer r.HoldPages(0, nil)
	for r.Next() {
		rec := r.Record()
		if pre.Changes(rec) {
			// The walkers' maps change: let every walk sent so far finish.
			send()
			walking.Wait()
			pre.Observe(rec)
		}
		if b == nil {
			select {
			case b = <-free:
			case <-stop:
				return
			}
			b.n, b.nwalks = 0, 0
		}
		it := &b.items[b.n]
		if !ru.copyItem(it, rec, r.Stable()) {
			continue
		}
		it.walk = -1
		if ev := it.smp.Event; it.kind == itemSample && ev != nil && ev.Index < len(walkEv) && walkEv[ev.Index] {
			it.walk = int32(b.nwalks)
			w := &b.walks[b.nwalks]
			b.nwalks++
			pre.Prepare(rec.(*perfdata.Sample), w, !r.Stable())
			it.smp.Stack = w.Stack()
		}
		b.n++
		b.offset = rec.Common().Offset
		if b.n == len(b.items) || b.nwalks == len(b.walks) {
			send()
		}
	}
	send()
}

// copyItem copies rec into it; false for records the run does not act on.
// The reader reuses records and their decoded slices: what the run reads
// later is copied, byte slices too unless the input is stable.
func (ru *run) copyItem(it *pipeItem, rec perfdata.Record, stable bool) bool {
	switch rec := rec.(type) {
	case *perfdata.Sample:
		it.kind = itemSample
		it.smp = perfdata.Sample{RecordCommon: rec.RecordCommon, Event: rec.Event,
			IP: rec.IP, Addr: rec.Addr, Period: rec.Period, Raw: rec.Raw, RegsABI: rec.RegsABI, RegsMask: rec.RegsMask}
		if !stable && rec.Raw != nil {
			it.raw = append(it.raw[:0], rec.Raw...)
			it.smp.Raw = it.raw
		}
	case *perfdata.Mmap:
		it.kind, it.mmap = itemMmap, *rec
		if rec.BuildID != nil {
			it.bid = append(it.bid[:0], rec.BuildID...)
			it.mmap.BuildID = it.bid
		}
	case *perfdata.Comm:
		it.kind, it.comm = itemComm, *rec
	case *perfdata.Fork:
		it.kind, it.fork = itemFork, *rec
	case *perfdata.Exit:
		it.kind, it.exit = itemExit, *rec
	case *perfdata.Lost:
		it.kind, it.lost = itemLost, *rec
	case *perfdata.LostSamples:
		it.kind, it.ls = itemLostSamples, *rec
	default:
		return false
	}
	return true
}

// walks reports whether the run will unwind the stacks of in's samples
// (sample and joinSample call stackOf exactly for these).
func walks(in *eventInfo) bool {
	switch in.role {
	case RoleStack:
		return true
	case RoleAllocEntry, RoleFault:
		return hasStacks(in.ev)
	}
	return false
}

// consume feeds a walked batch to the run in order.
func (ru *run) consume(b *pipeBatch) error {
	for i := range b.n {
		it := &b.items[i]
		var rec perfdata.Record
		switch it.kind {
		case itemSample:
			ru.walk = nil
			if it.walk >= 0 {
				ru.walk = &b.walks[it.walk]
			}
			rec = &it.smp
		case itemMmap:
			rec = &it.mmap
		case itemComm:
			rec = &it.comm
		case itemFork:
			rec = &it.fork
		case itemExit:
			rec = &it.exit
		case itemLost:
			rec = &it.lost
		case itemLostSamples:
			rec = &it.ls
		}
		if err := ru.handle(rec); err != nil {
			return err
		}
	}
	return nil
}

// stackOf returns smp's interned stack: walked by the pipeline, or
// unwound now.
func (ru *run) stackOf(smp *perfdata.Sample) attribute.StackID {
	if w := ru.walk; w != nil {
		ru.walk = nil
		return attribute.StackID(ru.sess.Intern(w, false))
	}
	id, _ := ru.sess.Unwind(smp, false)
	return attribute.StackID(id)
}
