package timeline

import (
	"bytes"
	"encoding/xml"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/symbolize"
	"github.com/faultline/faultline/symbolize/symtest"
)

// phasesChart analyzes testdata/mem's recording of src/phases.c (its
// phases: big64 64 MiB, big32 32 MiB, small, own_map 16 MiB then 8 MiB) and
// draws it.
func phasesChart(t *testing.T) *Chart {
	t.Helper()
	r, sess := symtest.Open(t, "../../testdata/mem/phases.data", symbolize.Config{Symfs: "../../testdata/mem/symfs", Getenv: func(string) string { return "" }})
	res, err := analyze.Run(r, sess, analyze.Options{Attr: attribute.DefaultConfig(), Mode: report.ByAlloc, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Build(res, "Resident memory by site: phases.data", 400, 8)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// phaseColumns returns, per site (its function name), its peak and the
// first and last columns where it holds more than 1 MiB.
func phaseColumns(c *Chart) (peaks map[string]int64, starts, ends map[string]int) {
	peaks, starts, ends = map[string]int64{}, map[string]int{}, map[string]int{}
	for _, s := range c.Sites {
		name, _, _ := strings.Cut(s.Name, " ")
		starts[name] = -1
		for k, v := range s.Bytes {
			peaks[name] = max(peaks[name], v)
			if v > 1<<20 {
				if starts[name] < 0 {
					starts[name] = k
				}
				ends[name] = k
			}
		}
	}
	return peaks, starts, ends
}

// TestChartPhases: the series follow the program's phases (arithmetic on
// phases.c): big64 reaches 64 MiB and one page (the page glibc's malloc
// took on its own memory serving the call, inside=allocator, which stays),
// big32 32 MiB, own_map 16 MiB, and each is back under 1 MiB before the
// next begins (freed or unmapped); the peak is big64's.
func TestChartPhases(t *testing.T) {
	c := phasesChart(t)
	peaks, starts, ends := phaseColumns(c)
	for name, want := range map[string]int64{"big64": 64<<20 + 4096, "big32": 32 << 20, "own_map": 16 << 20} {
		if peaks[name] != want {
			t.Errorf("%s peaks at %d bytes, want %d", name, peaks[name], want)
		}
	}
	if !(ends["big64"] < starts["big32"] && ends["big32"] < starts["own_map"]) {
		t.Errorf("phases overlap: big64 %d..%d, big32 %d..%d, own_map %d..%d (columns)",
			starts["big64"], ends["big64"], starts["big32"], ends["big32"], starts["own_map"], ends["own_map"])
	}
	if c.PeakBytes < 64<<20 || c.PeakTime < c.Times[starts["big64"]] || c.PeakTime > c.Times[ends["big64"]] {
		t.Errorf("peak %d bytes at %.3f s, want ≥ 64 MiB within big64's columns", c.PeakBytes, c.PeakTime)
	}
	var faults uint64
	for _, f := range c.Faults {
		faults += f
	}
	if faults == 0 {
		t.Error("no faults per interval")
	}
}

// TestSVGWellFormed: the SVG parses as XML, names the sites, and a
// hostile site name is escaped.
func TestSVGWellFormed(t *testing.T) {
	c := phasesChart(t)
	c.Sites[0].Name = `<script>alert("x")</script> & co`
	var b bytes.Buffer
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
	}
	if strings.Contains(b.String(), "<script>") {
		t.Error("a site name reached the SVG unescaped")
	}
	if !strings.Contains(b.String(), "big32 phases.c:50") {
		t.Error("the SVG does not name big32")
	}
}

// TestChromiumRendersPhases renders the SVG with headless Chromium and
// looks at the pixels: each of big64, big32 and own_map has its color
// where its phase ran (the columns where the chart says it held more than
// 1 MiB), one after the other from left to right. It skips
// only where Chromium is missing. FAULTLINE_TIMELINE_PNG=path keeps the
// PNG (testdata/mem/timeline.png was made so).
func TestChromiumRendersPhases(t *testing.T) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no chromium in PATH (apt-get install chromium): the rendered picture is not checked")
	}
	c := phasesChart(t)
	dir := t.TempDir()
	svg := filepath.Join(dir, "rss.svg")
	f, err := os.Create(svg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteSVG(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out := filepath.Join(dir, "rss.png")
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--window-size=1100,640", "--screenshot="+out, "file://"+svg)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, msg)
	}
	shot, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	if keep := os.Getenv("FAULTLINE_TIMELINE_PNG"); keep != "" {
		if err := os.WriteFile(keep, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Count each series' color in thirds of the plot area.
	plot := image.Rect(left, top, width-right, areaBottom)
	count := func(col string, x0, x1 int) int {
		want := parseHex(col)
		n := 0
		for y := plot.Min.Y; y < plot.Max.Y; y++ {
			for x := x0; x < x1; x++ {
				if near(img.At(x, y), want) {
					n++
				}
			}
		}
		return n
	}
	colorOf := map[string]string{}
	for i, s := range c.Sites {
		name, _, _ := strings.Cut(s.Name, " ")
		colorOf[name] = palette[i%len(palette)]
	}
	_, starts, ends := phaseColumns(c)
	xOf := func(k int) int { return plot.Min.X + plot.Dx()*k/len(c.Times) }
	prev := plot.Min.X
	for _, site := range []string{"big64", "big32", "own_map"} {
		x0, x1 := xOf(starts[site])-3, xOf(ends[site]+1)+3
		in := count(colorOf[site], x0, x1)
		all := count(colorOf[site], plot.Min.X, plot.Max.X)
		if in < 1000 || in < all*9/10 || x0 < prev-6 {
			t.Errorf("%s (%s): %d of its %d pixels within x %d..%d (after the previous phase, x %d), want ≥ 1000 and ≥ 90%%", site, colorOf[site], in, all, x0, x1, prev)
		}
		prev = x1
	}
}

func parseHex(s string) color.RGBA {
	var c color.RGBA
	c.A = 255
	v := func(h string) uint8 {
		var n uint8
		for _, r := range h {
			n *= 16
			switch {
			case r >= '0' && r <= '9':
				n += uint8(r - '0')
			default:
				n += uint8(r-'a') + 10
			}
		}
		return n
	}
	c.R, c.G, c.B = v(s[1:3]), v(s[3:5]), v(s[5:7])
	return c
}

func near(c color.Color, want color.RGBA) bool {
	r, g, b, _ := c.RGBA()
	d := func(a uint32, b uint8) int { return int(a>>8) - int(b) }
	abs := func(x int) int {
		if x < 0 {
			return -x
		}
		return x
	}
	return abs(d(r, want.R))+abs(d(g, want.G))+abs(d(b, want.B)) < 24
}

// TestSVGSnapshots: each page-table read is a circle at its time and
// bytes, a dot (filled) for one taken at an exit, and the SVG still
// parses.
func TestSVGSnapshots(t *testing.T) {
	c := phasesChart(t)
	tmax := c.Times[len(c.Times)-1]
	c.Snapshots = []Snapshot{{Time: tmax / 4, Bytes: 32 << 20}, {Time: tmax, Bytes: 1 << 20, Exit: true}}
	var b bytes.Buffer
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	if n := strings.Count(svg, "<circle"); n != 2 {
		t.Errorf("%d circles, want 2", n)
	}
	if !strings.Contains(svg, `fill="#000000" stroke="#000" stroke-width="1"><title>page tables at`) || !strings.Contains(svg, "32.0 MiB</title>") {
		t.Error("the exit's dot or the 32 MiB read is missing")
	}
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
	}
}
