package perfdata

// prefetch hints the CPU to cache the start and the end of b (a record
// about to be decoded), which must not be empty. See prefetch_amd64.s.
//
//go:noescape
func prefetch(b []byte)
