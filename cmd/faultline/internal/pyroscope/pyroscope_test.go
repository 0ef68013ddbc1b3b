package pyroscope

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/faultline/faultline/cmd/faultline/internal/pyroscope/pyroscopetest"
	"github.com/google/pprof/profile"
)

func startServer(t *testing.T) *pyroscopetest.Server { return pyroscopetest.Start(t) }

// testProfile is a small profile of faultline's shape: three sample types,
// two stacks, a label.
func testProfile(t *testing.T) ([]byte, *profile.Profile) {
	t.Helper()
	m := &profile.Mapping{ID: 1, Start: 0x400000, Limit: 0x500000, File: "/usr/bin/app", BuildID: "abcd"}
	fn1 := &profile.Function{ID: 1, Name: "main", Filename: "app.c"}
	fn2 := &profile.Function{ID: 2, Name: "fill", Filename: "app.c"}
	l1 := &profile.Location{ID: 1, Mapping: m, Address: 0x401000, Line: []profile.Line{{Function: fn1, Line: 10}}}
	l2 := &profile.Location{ID: 2, Mapping: m, Address: 0x402000, Line: []profile.Line{{Function: fn2, Line: 27}}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "faults", Unit: "count"}, {Type: "allocs", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}},
		PeriodType: &profile.ValueType{Type: "faults", Unit: "count"}, Period: 1,
		Sample: []*profile.Sample{
			{Location: []*profile.Location{l2, l1}, Value: []int64{2048, 1, 8 << 20}, Label: map[string][]string{"flag": {"mmap"}}},
			{Location: []*profile.Location{l1}, Value: []int64{3, 10, 640}},
		},
		Mapping: []*profile.Mapping{m}, Location: []*profile.Location{l1, l2}, Function: []*profile.Function{fn1, fn2},
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), p
}

// TestPushArrives: what the official handler receives is one series with
// the labels given and the profile's bytes unchanged, which parse to the
// same samples.
func TestPushArrives(t *testing.T) {
	srv := startServer(t)
	raw, want := testProfile(t)
	labels, err := SeriesLabels("app", []Label{{"commit", "abc123"}, {"branch", "main"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(&http.Client{Timeout: 10 * time.Second}, srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Push(context.Background(), raw, labels); err != nil {
		t.Fatal(err)
	}
	if len(srv.Requests()) != 1 || len(srv.Requests()[0].Series) != 1 || len(srv.Requests()[0].Series[0].Samples) != 1 {
		t.Fatalf("received %v", srv.Requests())
	}
	series := srv.Requests()[0].Series[0]
	if g := pyroscopetest.Labels(series); g != "__name__=faultline,branch=main,commit=abc123,service_name=app" {
		t.Errorf("labels %s", g)
	}
	s := series.Samples[0]
	if !bytes.Equal(s.RawProfile, raw) {
		t.Errorf("profile bytes changed on the way: %d bytes sent, %d received", len(raw), len(s.RawProfile))
	}
	if len(s.ID) != 36 || s.ID[14] != '4' {
		t.Errorf("id %q: want a version 4 UUID", s.ID)
	}
	p, err := profile.ParseData(s.RawProfile)
	if err != nil {
		t.Fatal(err)
	}
	if p.String() != want.String() {
		t.Errorf("received profile differs:\n%s\nsent:\n%s", p, want)
	}
}

// TestPushCredentials: user and token in the URL go as basic auth and are
// masked wherever the address is shown.
func TestPushCredentials(t *testing.T) {
	srv := startServer(t)
	raw, _ := testProfile(t)
	u := strings.Replace(srv.URL, "http://", "http://12345:s3cret@", 1)
	c, err := NewClient(&http.Client{Timeout: 10 * time.Second}, u)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.String(), "s3cret") {
		t.Errorf("address shown with its password: %s", c)
	}
	labels, _ := SeriesLabels("app", nil)
	if err := c.Push(context.Background(), raw, labels); err != nil {
		t.Fatal(err)
	}
	// base64("12345:s3cret")
	if len(srv.Auth()) != 1 || srv.Auth()[0] != "Basic MTIzNDU6czNjcmV0" {
		t.Errorf("Authorization %q", srv.Auth())
	}
	srv.Err = connect.NewError(connect.CodeUnauthenticated, nil)
	err = c.Push(context.Background(), raw, labels)
	if err == nil || !strings.Contains(err.Error(), "credentials") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("refused push: %v", err)
	}
}

// TestPushErrorsSayWhatToDo: a server that is not Pyroscope, one that is
// gone, and a bad address each get an error naming the likely cause.
func TestPushErrorsSayWhatToDo(t *testing.T) {
	raw, _ := testProfile(t)
	labels, _ := SeriesLabels("app", nil)
	notPyroscope := httptest.NewServer(http.NotFoundHandler())
	defer notPyroscope.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for _, tc := range []struct{ url, want string }{
		{notPyroscope.URL, "no Pyroscope push API"},
		{gone.URL, "is Pyroscope running"},
	} {
		c, err := NewClient(&http.Client{Timeout: 10 * time.Second}, tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Push(context.Background(), raw, labels); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.url, err, tc.want)
		}
	}
	for _, u := range []string{"localhost:4040", "ftp://host", "http://", "://x"} {
		if _, err := NewClient(http.DefaultClient, u); err == nil {
			t.Errorf("NewClient(%q) accepted", u)
		}
	}
}

func TestLabels(t *testing.T) {
	for _, s := range []string{"commit=abc", "service_name=api", "_x=1", "A9=v"} {
		if _, err := ParseLabel(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"commit", "=v", "9a=v", "a-b=v", "a.b=v", "__name__=x", "k=", "k=" + strings.Repeat("v", 2049)} {
		if _, err := ParseLabel(s); err == nil {
			t.Errorf("%s accepted", s)
		}
	}
	ls, err := SeriesLabels("app", []Label{{"service_name", "api"}})
	if err != nil || len(ls) != 2 || ls[1] != (Label{"service_name", "api"}) {
		t.Errorf("service_name override: %v %v", ls, err)
	}
	if _, err := SeriesLabels("app", []Label{{"k", "1"}, {"k", "2"}}); err == nil {
		t.Error("a label given twice was accepted")
	}
	if _, err := SeriesLabels("", nil); err == nil || !strings.Contains(err.Error(), "service_name=NAME") {
		t.Errorf("empty service name: %v", err)
	}
}
