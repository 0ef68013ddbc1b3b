package diff

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/faultline/faultline/perfdata/perftest"
)

func wantNotProfile(t *testing.T, err error, msg string) {
	t.Helper()
	var npe *notProfileError
	if !errors.As(err, &npe) || !strings.Contains(err.Error(), msg) {
		t.Errorf("err = %v, want a NotProfileError saying %q", err, msg)
	}
}

// A gzip inside a gzip: the outer layer inflates to 2 MB, the inner one
// would inflate to 2 GiB. Every layer is capped.
func TestReadNestedGzip(t *testing.T) {
	_, err := load(perftest.Testdata(t, "crafted", "diff-nested.pb.gz"))
	wantNotProfile(t, err, "gzip layer 2: decompresses to more than 128 MiB")
}

// Three layers are refused whatever their size: pprof writes one.
func TestReadGzipDepth(t *testing.T) {
	data := []byte("not even a profile")
	for range 3 {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(data)
		zw.Close()
		data = b.Bytes()
	}
	_, err := Read("x", bytes.NewReader(data))
	wantNotProfile(t, err, "gzip inside gzip more than 2 times")
}

// An input that never ends (diff /dev/zero x) stops after maxInputSize.
func TestReadEndless(t *testing.T) {
	f, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = Read("/dev/zero", f)
	wantNotProfile(t, err, "more than 64 MiB, larger than any faultline profile")
}

// Small protobuf that parses into large structs is refused before the
// parser sees it: 24 MiB of four-byte samples (the parser would allocate
// about 44× that, by the measurement in pbcost.go).
func TestReadParseCost(t *testing.T) {
	sample := []byte{0x12, 0x02, 0x10, 0x01} // sample { value: 1 }
	data := bytes.Repeat(sample, 6<<20)
	_, err := Read("x", bytes.NewReader(data))
	// 6Mi samples × (costSample + costValue) = 1152 MiB estimated.
	wantNotProfile(t, err, "loading it would take about 1152 MiB")
}

// A pipe can be read only once: Sniff keeps what it peeked.
func TestSniffPipe(t *testing.T) {
	want, err := os.ReadFile(perftest.Testdata(t, "crafted", "diff-sat-new.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { pw.Write(want); pw.Close() }()
	r, perf, err := Sniff(pr)
	if err != nil || perf {
		t.Fatalf("Sniff = %v, %v", perf, err)
	}
	p, err := Read("pipe", r)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sample) != 1 || p.Sample[0].Value[0] != math.MaxInt64-15 {
		t.Errorf("read %v", p.Sample)
	}
	r, perf, err = Sniff(strings.NewReader("PERFILE2 and more"))
	if b, _ := io.ReadAll(r); !perf || err != nil || string(b) != "PERFILE2 and more" {
		t.Errorf("Sniff(perf) = %v, %v, rest %q", perf, err, b)
	}
}

// One site, grow_table sat.c:10: BASE -(2^63-16), NEW 2^63-16 (diff-sat-*.pb.gz): NEW-BASE is 2^64-32,
// which wraps to -32 in int64 and read as "shrank by 32". Saturated, the
// site grows by MaxInt64 and regresses.
func TestCompareSaturates(t *testing.T) {
	base, err := load(perftest.Testdata(t, "crafted", "diff-sat-base.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	head, err := load(perftest.Testdata(t, "crafted", "diff-sat-new.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := compareOne(base, head, Options{Metric: "faults", Threshold: 0.1, MinDelta: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sites) != 1 || r.Sites[0].Name != "grow_table sat.c:10" || r.Sites[0].delta() != math.MaxInt64 || r.Sites[0].Status != StatusGrew || !r.Regressed() {
		t.Errorf("sites %+v, regressed %v", r.Sites, r.Regressed())
	}
	// And the other way round: shrinking by the most saturates at MinInt64.
	r, err = compareOne(head, base, Options{Metric: "faults", Threshold: 0.1, MinDelta: 8})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sites[0].delta() != math.MinInt64 || r.Regressed() {
		t.Errorf("reversed: delta %d, regressed %v", r.Sites[0].delta(), r.Regressed())
	}
	var b bytes.Buffer
	if err := Render(&b, r, "text", RenderOptions{}); err != nil || !strings.Contains(b.String(), "-9223372036854775808") || strings.Contains(b.String(), "--") {
		t.Errorf("rendering MinInt64: %v\n%s", err, b.String())
	}
	for _, c := range []struct{ a, b, sum, diff int64 }{
		{math.MaxInt64, 1, math.MaxInt64, math.MaxInt64 - 1},
		{math.MinInt64, -1, math.MinInt64, math.MinInt64 + 1},
		{-1, math.MinInt64, math.MinInt64, math.MaxInt64},
		{0, math.MinInt64, math.MinInt64, math.MaxInt64},
		{5, -3, 2, 8},
	} {
		if s, d := satAdd(c.a, c.b), satSub(c.a, c.b); s != c.sum || d != c.diff {
			t.Errorf("satAdd/satSub(%d, %d) = %d, %d, want %d, %d", c.a, c.b, s, d, c.sum, c.diff)
		}
	}
}

// A 16 MiB class name and a 16 MiB flag (diff-wide.pb.gz) print as 512
// bytes each and a note of what was cut, in every format.
func TestRenderClipsLabels(t *testing.T) {
	p, err := load(perftest.Testdata(t, "crafted", "diff-wide.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := compareOne(p, p, Options{Metric: "faults", Threshold: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := Render(&b, r, format, RenderOptions{}); err != nil {
			t.Fatal(err)
		}
		if b.Len() > 16<<10 || !strings.Contains(b.String(), "[16776704 bytes cut]") {
			t.Errorf("%s: %d bytes of output", format, b.Len())
		}
	}
}
