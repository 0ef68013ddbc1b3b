//go:build !amd64

package perfdata

func prefetch(b []byte) {}
