package binfile

import (
	"runtime"
	"sync"
)

// background runs the work opening a binary leaves for later (symbol
// tables, inflating debug sections) in the order it was queued, on at most
// backgroundWorkers goroutines: opening every binary of a recording at once
// would otherwise start dozens of goroutines that share the cores evenly,
// so that the binary needed first (libc, whose .debug_info takes the
// longest) would be ready last. Work that a caller needs before a worker
// reaches it is done by the caller (see Binary.symbols and
// lazySection.ensure), so nothing waits behind the queue.
var background = &workQueue{}

// backgroundWorkers bounds the background goroutines: two streams inflate
// in parallel (a big debug file's .debug_info and its other sections),
// leaving the rest of the machine to decoding and unwinding.
const backgroundWorkers = 2

// workQueue runs queued functions in order on at most backgroundWorkers
// goroutines, started as needed and ended when the queue is empty.
type workQueue struct {
	mu      sync.Mutex
	jobs    []func()
	running int
}

// add queues f.
func (q *workQueue) add(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.jobs = append(q.jobs, f)
	if q.running < backgroundWorkers {
		q.running++
		go q.work()
	}
}

func (q *workQueue) work() {
	for {
		q.mu.Lock()
		if len(q.jobs) == 0 {
			q.running--
			q.mu.Unlock()
			return
		}
		f := q.jobs[0]
		q.jobs[0] = nil
		q.jobs = q.jobs[1:]
		q.mu.Unlock()
		f()
		runtime.Gosched() // let a caller f woke run now, not after this goroutine's time slice
	}
}
