// Package pyroscope sends faultline's profiles to Grafana Pyroscope through
// its push API, push.v1.PusherService/Push
// (https://grafana.com/docs/pyroscope/latest/reference-server-api/), with
// the official generated client (github.com/grafana/pyroscope/api) over
// connect. A profile goes as the gzipped pprof bytes faultline wrote, under
// one series of labels.
package pyroscope

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"connectrpc.com/connect"
	pushv1 "github.com/grafana/pyroscope/api/gen/proto/go/push/v1"
	"github.com/grafana/pyroscope/api/gen/proto/go/push/v1/pushv1connect"
	typesv1 "github.com/grafana/pyroscope/api/gen/proto/go/types/v1"
)

// Label names Pyroscope gives a meaning to.
const (
	// LabelName is the profile's name: Grafana lists the profile types as
	// NAME:SAMPLE_TYPE:UNIT:PERIOD_TYPE:PERIOD_UNIT, e.g.
	// faultline:faults:count:faults:count.
	LabelName = "__name__"
	// LabelService is the service a profile belongs to; Pyroscope refuses
	// a series without it.
	LabelService = "service_name"
	// ProfileName is the __name__ of every profile faultline pushes.
	ProfileName = "faultline"
)

// Label is one name=value label of the pushed series.
type Label struct{ Name, Value string }

// ParseLabel reads "name=value".
func ParseLabel(s string) (Label, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return Label{}, fmt.Errorf("label %q: want NAME=VALUE", s)
	}
	l := Label{Name: name, Value: value}
	return l, l.check()
}

// check applies the rules Pyroscope's distributor applies, so that a bad
// label fails here with its name rather than as a refused push.
func (l Label) check() error {
	if l.Name == "" || len(l.Name) > 1024 {
		return fmt.Errorf("label name %q: want 1 to 1024 characters", l.Name)
	}
	for i, c := range l.Name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Errorf("label name %q: want letters, digits and _ (not a digit first), as Prometheus label names", l.Name)
		}
	}
	if strings.HasPrefix(l.Name, "__") {
		return fmt.Errorf("label name %q: names starting with __ are Pyroscope's own", l.Name)
	}
	if l.Value == "" || len(l.Value) > 2048 {
		return fmt.Errorf("label %s: want a value of 1 to 2048 bytes", l.Name)
	}
	return nil
}

// SeriesLabels returns the labels a profile is pushed with: __name__,
// service_name (service unless labels name one) and labels, sorted by name.
// A name given twice is an error.
func SeriesLabels(service string, labels []Label) ([]Label, error) {
	out := []Label{{LabelName, ProfileName}}
	seen := map[string]bool{}
	for _, l := range labels {
		if err := l.check(); err != nil {
			return nil, err
		}
		if seen[l.Name] {
			return nil, fmt.Errorf("label %s given twice", l.Name)
		}
		seen[l.Name] = true
		out = append(out, l)
	}
	if !seen[LabelService] {
		l := Label{LabelService, service}
		if err := l.check(); err != nil {
			return nil, fmt.Errorf("service name: %w (name it with --label service_name=NAME)", err)
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Client pushes profiles to one Pyroscope server.
type Client struct {
	url    string
	pusher pushv1connect.PusherServiceClient
}

// NewClient returns a client for the server at rawURL (http or https, as
// Grafana shows it, e.g. http://localhost:4040). Credentials in the URL
// (https://USER:TOKEN@host, as Grafana Cloud gives them) are sent as HTTP
// basic auth. hc bounds the request (its Timeout).
func NewClient(hc *http.Client, rawURL string) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want the Pyroscope server's http:// or https:// address, e.g. http://localhost:4040", rawURL)
	}
	return &Client{url: u.Redacted(), pusher: pushv1connect.NewPusherServiceClient(hc, strings.TrimSuffix(rawURL, "/"))}, nil
}

// String is the server's address, any password in it masked.
func (c *Client) String() string { return c.url }

// Push sends one gzipped pprof profile under labels (see SeriesLabels).
func (c *Client) Push(ctx context.Context, profile []byte, labels []Label) error {
	series := &pushv1.RawProfileSeries{Samples: []*pushv1.RawSample{{RawProfile: profile, ID: newUUID()}}}
	for _, l := range labels {
		series.Labels = append(series.Labels, &typesv1.LabelPair{Name: l.Name, Value: l.Value})
	}
	_, err := c.pusher.Push(ctx, connect.NewRequest(&pushv1.PushRequest{Series: []*pushv1.RawProfileSeries{series}}))
	if err == nil {
		return nil
	}
	var what string
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		what = "the server wants credentials: put them in the URL (https://USER:TOKEN@HOST)"
	case connect.CodeUnimplemented, connect.CodeNotFound:
		what = "no Pyroscope push API there: give the server's base address (Grafana's Pyroscope data source URL), not a path under it"
	case connect.CodeUnavailable:
		what = "is Pyroscope running at that address, and reachable from here?"
	case connect.CodeDeadlineExceeded:
		what = "no answer in time: raise --timeout, or check the address"
	case connect.CodeInvalidArgument, connect.CodeResourceExhausted:
		what = "the server refused the profile (its limits or labels)"
	}
	msg := fmt.Sprintf("pushing to %s: %v", c.url, err)
	if what != "" {
		msg += "; " + what
	}
	return errors.New(msg)
}

// newUUID returns a random (version 4) UUID, the id Pyroscope gives a
// pushed profile.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
