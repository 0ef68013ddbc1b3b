// Package symtest helps tests that symbolize a recording: it opens one with
// a session over it. Like net/http/httptest it is meant for tests only.
package symtest

import (
	"testing"

	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize"
)

// Open opens the recording at path and a session over it with cfg's files;
// both are closed when the test ends. A missing recording fails tb.
func Open(tb testing.TB, path string, cfg symbolize.Config) (*perfdata.Reader, *symbolize.Session) {
	tb.Helper()
	r, err := perfdata.Open(path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	sess, err := symbolize.NewSession(cfg, r.Meta())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sess.Close() })
	return r, sess
}
