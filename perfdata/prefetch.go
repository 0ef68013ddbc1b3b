package perfdata

// Prefetch hints the CPU to cache the first n bytes of b (all of b when n
// is larger) without waiting for them. A record's bytes, read from a large
// recording long after the file was read into the page cache, are rarely
// in the CPU's caches: a consumer that knows which record or stack it
// reads next asks for it while it works on the current one. It never
// faults and changes nothing a program can observe but time; a no-op
// where the architecture has no prefetch instruction wired here.
func Prefetch(b []byte, n int) {
	n = min(n, len(b))
	if n > 0 {
		prefetchLines(&b[0], (n+63)/64)
	}
}

// prefetchRecord asks for what decoding rec reads first: its header and
// the fields before a sample's stack, and its last word (a sample's
// dyn_size).
func prefetchRecord(rec []byte) {
	if len(rec) > 0 {
		prefetchLines(&rec[0], min(8, (len(rec)+63)/64))
		prefetchLines(&rec[len(rec)-1], 1)
	}
}
