package perfdata

// prefetchLines asks the CPU to bring the n cache lines (64 bytes) from p
// into its cache, without waiting for them; see prefetch_amd64.s.
//
//go:noescape
func prefetchLines(p *byte, n int)
