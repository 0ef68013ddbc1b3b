package recorder

import (
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Stalls say why record may have kept the program waiting (and then, past
// the shim's wait, running on unrecorded): how long its writes to a
// streamed output blocked at most (a pipe whose reader lagged), whether
// it was stopped (it got SIGCONT), and its longest pause otherwise seen
// (not scheduled: starved of CPU, or stopped).
type Stalls struct {
	WriteBlocked time.Duration
	Stopped      bool
	Paused       time.Duration
}

// stallWatch measures Stalls while a recording runs.
type stallWatch struct {
	mu   sync.Mutex
	st   Stalls
	cont chan os.Signal
	quit chan struct{}
	done chan struct{}
}

// pauseTick is how often the watch looks at the clock: a pause shorter
// than a few ticks is noise.
const pauseTick = 20 * time.Millisecond

func startStallWatch() *stallWatch {
	w := &stallWatch{cont: make(chan os.Signal, 1), quit: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(w.cont, syscall.SIGCONT)
	go func() {
		defer close(w.done)
		t := time.NewTicker(pauseTick)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-w.quit:
				return
			case <-w.cont:
				w.mu.Lock()
				w.st.Stopped = true
				w.mu.Unlock()
			case now := <-t.C:
				if gap := now.Sub(last) - pauseTick; gap > 0 {
					w.mu.Lock()
					w.st.Paused = max(w.st.Paused, gap)
					w.mu.Unlock()
				}
				last = now
			}
		}
	}()
	return w
}

// stop ends the watch and returns what it saw.
func (w *stallWatch) stop() Stalls {
	close(w.quit)
	<-w.done
	signal.Stop(w.cont)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// timedWriter is a streamed output whose longest write the watch keeps.
type timedWriter struct {
	w     io.Writer
	watch *stallWatch
}

func (t *timedWriter) Write(p []byte) (int, error) {
	start := time.Now()
	n, err := t.w.Write(p)
	if d := time.Since(start); d > pauseTick {
		t.watch.mu.Lock()
		t.watch.st.WriteBlocked = max(t.watch.st.WriteBlocked, d)
		t.watch.mu.Unlock()
	}
	return n, err
}
