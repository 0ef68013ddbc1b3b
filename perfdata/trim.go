package perfdata

// Trim hands the buffers the Reader keeps for reuse to the garbage
// collector, beyond what the records it holds need: the arena's free
// chunks and the time-order queue's spare room. A burst (a stream's
// writer that fell behind, then one large round) grows them to its size;
// a caller reading a stream for hours trims now and then (record --every
// at each window's end), so that it holds what its steady state needs.
// Reading goes on as before; the next burst grows them again.
func (r *Reader) Trim() { r.trim(trimKeep) }

// trim is Trim leaving room for keep more queued records.
func (r *Reader) trim(keep int) {
	a := &r.src.arena
	clear(a.free)
	a.free, a.freeBytes = a.free[:0], 0
	q := &r.q
	if n := len(q.pending); cap(q.pending) > 2*n+keep {
		q.pending = append(make([]qent, 0, n+keep), q.pending...)
	}
	if n := len(q.ready) - q.readyPos; cap(q.ready) > 2*n+keep {
		q.ready = append(make([]qent, 0, n+keep), q.ready[q.readyPos:]...)
		q.readyPos = 0
	}
}

// trimKeep is the queue room Trim leaves: a steady stream's rounds.
const trimKeep = 4096
