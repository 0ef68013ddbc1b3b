// Package pyroscopetest serves Pyroscope's push API in process for tests:
// the official generated connect handler
// (pushv1connect.NewPusherServiceHandler), keeping what arrives. The
// Pyroscope server itself is not installable here.
package pyroscopetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	pushv1 "github.com/grafana/pyroscope/api/gen/proto/go/push/v1"
	"github.com/grafana/pyroscope/api/gen/proto/go/push/v1/pushv1connect"
)

// Server is one push endpoint. Err, when set, is what Push answers.
type Server struct {
	pushv1connect.UnimplementedPusherServiceHandler
	URL string

	mu       sync.Mutex
	requests []*pushv1.PushRequest
	auth     []string
	Err      error
}

// Start serves a Server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	mux := http.NewServeMux()
	mux.Handle(pushv1connect.NewPusherServiceHandler(s))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// Push implements pushv1connect.PusherServiceHandler.
func (s *Server) Push(_ context.Context, req *connect.Request[pushv1.PushRequest]) (*connect.Response[pushv1.PushResponse], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req.Msg)
	s.auth = append(s.auth, req.Header().Get("Authorization"))
	if s.Err != nil {
		return nil, s.Err
	}
	return connect.NewResponse(&pushv1.PushResponse{}), nil
}

// Requests returns the requests received so far.
func (s *Server) Requests() []*pushv1.PushRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pushv1.PushRequest(nil), s.requests...)
}

// Auth returns each request's Authorization header.
func (s *Server) Auth() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// Labels renders a series' labels as name=value, comma-separated, in the
// order they came.
func Labels(series *pushv1.RawProfileSeries) string {
	var kv []string
	for _, l := range series.Labels {
		kv = append(kv, l.Name+"="+l.Value)
	}
	return strings.Join(kv, ",")
}
