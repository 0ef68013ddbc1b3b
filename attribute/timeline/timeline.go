// Package timeline draws a recording's resident memory over time, stacked
// by the sites that held it (analyze's Timeline), with the faults per
// interval below and the peak marked: a self-contained SVG (or an HTML
// page holding it) that any browser opens without the network.
package timeline

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/attribute/analyze"
	"github.com/faultline/faultline/attribute/report"
)

// Series is one site's resident bytes at each column's time.
type Series struct {
	Name  string
	Bytes []int64
}

// Chart is what the picture shows.
type Chart struct {
	Title string
	// Times are the columns' times, in seconds from the first sample.
	Times []float64
	// Sites are the top sites, largest peak first; the last may be
	// "other" (every site not shown on its own).
	Sites []Series
	// Faults counts the faults that made a page resident in each column's
	// interval.
	Faults    []uint64
	PeakBytes int64
	PeakTime  float64 // seconds from the first sample
	// ProcessAnon is the program's own peak anonymous RSS, when recorded.
	ProcessAnon int64
	// Snapshots are the times (seconds from the first sample) the page
	// tables were read and what each process's held of its own then.
	Snapshots []Snapshot
}

// Snapshot is one read of a process's page tables.
type Snapshot struct {
	Time  float64
	Bytes int64
	Exit  bool // read as the process exited
}

// Build makes a chart of columns columns and at most top sites (plus
// "other") from a run made with analyze.Options.Timeline.
func Build(res *analyze.Result, title string, columns, top int) (*Chart, error) {
	tl := res.Timeline
	if tl == nil {
		return nil, fmt.Errorf("the run kept no timeline (analyze.Options.Timeline)")
	}
	if columns < 2 {
		columns = 2
	}
	p := res.Profile
	first, last := tl.First, tl.Last
	if last <= first {
		last = first + 1
	}
	c := &Chart{Title: title, ProcessAnon: res.Summary.Resident.ProcessAnon, PeakBytes: res.Summary.Resident.PeakBytes}
	c.PeakTime = float64(res.Summary.Resident.Start+res.Summary.Resident.PeakTime-first) / 1e9
	for _, sp := range tl.Snapshots {
		if sp.Time >= first {
			c.Snapshots = append(c.Snapshots, Snapshot{Time: float64(sp.Time-first) / 1e9, Bytes: sp.Held, Exit: sp.Exit})
		}
	}
	ts := make([]uint64, columns)
	for k := range ts {
		ts[k] = first + uint64(float64(k+1)*float64(last-first)/float64(columns))
		c.Times = append(c.Times, float64(ts[k]-first)/1e9)
	}
	owners := len(p.Sample)
	at := attribute.ResidentAt(tl.Points, owners, ts)
	// Sites by name: an owner is a profile sample.
	if owners == 0 {
		return nil, fmt.Errorf("the recording has no faults to draw")
	}
	index := map[string]int{}
	var names []string
	ownerSite := make([]int, owners)
	for i, s := range p.Sample {
		n := report.SampleName(s, false)
		j, ok := index[n]
		if !ok {
			j = len(names)
			index[n] = j
			names = append(names, n)
		}
		ownerSite[i] = j
	}
	bySite := make([][]int64, len(names))
	for j := range bySite {
		bySite[j] = make([]int64, columns)
	}
	for k, row := range at {
		for o, pages := range row {
			bySite[ownerSite[o]][k] += pages * attribute.PageSize
		}
	}
	order := make([]int, len(names))
	peakOf := make([]int64, len(names))
	for j := range order {
		order[j] = j
		peakOf[j] = slices.Max(bySite[j])
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Or(cmp.Compare(peakOf[b], peakOf[a]), cmp.Compare(names[a], names[b])) })
	other := make([]int64, columns)
	hasOther := false
	// A site under 1/200 of the largest is a sliver no one can see: it
	// goes to "other" with the sites past the top.
	least := peakOf[order[0]] / 200
	for r, j := range order {
		if peakOf[j] == 0 {
			break
		}
		if r < top && peakOf[j] > least {
			c.Sites = append(c.Sites, Series{Name: names[j], Bytes: bySite[j]})
			continue
		}
		hasOther = true
		for k := range other {
			other[k] += bySite[j][k]
		}
	}
	if hasOther {
		c.Sites = append(c.Sites, Series{Name: "other", Bytes: other})
	}
	c.Faults = make([]uint64, columns)
	for i, n := range tl.Faults {
		t := tl.Start + uint64(i)*tl.Tick
		k := 0
		if t > first {
			k = int(float64(t-first) / float64(last-first) * float64(columns))
		}
		c.Faults[min(k, columns-1)] += n
	}
	return c, nil
}

// Geometry of the picture, in SVG user units (px).
const (
	width      = 1100
	height     = 640
	left       = 80
	right      = 330 // room for the legend
	top        = 50
	areaBottom = 450
	barsTop    = 490
	barsBottom = 580
)

var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"}

const otherColor = "#bab0ac"

// WriteSVG writes the chart as a standalone SVG document.
func (c *Chart) WriteSVG(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">`+"\n", width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="#ffffff"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="18" font-weight="bold">%s</text>`+"\n", left, esc(c.Title))
	plotW := float64(width - left - right)
	tmax := 0.0
	if n := len(c.Times); n > 0 {
		tmax = c.Times[n-1]
	}
	if tmax <= 0 {
		tmax = 1
	}
	x := func(t float64) float64 { return left + plotW*t/tmax }
	// Totals per column, for the y scale.
	n := len(c.Times)
	totals := make([]int64, n)
	for _, s := range c.Sites {
		for k, v := range s.Bytes {
			totals[k] += v
		}
	}
	ymax := max(slices.Max(append(totals, 1)), c.PeakBytes, c.ProcessAnon)
	step := niceStep(float64(ymax) / (1 << 20))
	ytop := math.Ceil(float64(ymax)/(1<<20)/step) * step
	y := func(bytes float64) float64 { return areaBottom - (areaBottom-top)*bytes/(1<<20)/ytop }
	// Grid and y axis, in MiB.
	for v := 0.0; v <= ytop+step/2; v += step {
		yy := y(v * (1 << 20))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", left, yy, x(tmax), yy)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yy+4, trimFloat(v))
	}
	fmt.Fprintf(&b, `<text x="18" y="%d" transform="rotate(-90 18 %d)" text-anchor="middle">resident memory (MiB)</text>`+"\n", (top+areaBottom)/2, (top+areaBottom)/2)
	// Stacked areas, the largest site at the bottom.
	base := make([]int64, n)
	for i, s := range c.Sites {
		color := palette[i%len(palette)]
		if s.Name == "other" {
			color = otherColor
		}
		var pts []string
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(0), y(float64(base[0]))))
		for k := range n {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(c.Times[k]), y(float64(base[k]+s.Bytes[k]))))
		}
		for k := n - 1; k >= 0; k-- {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(c.Times[k]), y(float64(base[k]))))
		}
		fmt.Fprintf(&b, `<polygon points="%s" fill="%s" stroke="%s" stroke-width="0.5"><title>%s</title></polygon>`+"\n", strings.Join(pts, " "), color, color, esc(s.Name))
		for k := range n {
			base[k] += s.Bytes[k]
		}
		// The legend.
		ly := top + 10 + i*40
		lx := width - right + 20
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="14" fill="%s"/>`+"\n", lx, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+20, ly+12, esc(shorten(s.Name, 38)))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555" font-size="12">peak %s</text>`+"\n", lx+20, ly+28, report.FormatBytes(slices.Max(s.Bytes)))
	}
	// The process's own peak anonymous RSS, and the tracked peak.
	if c.ProcessAnon > 0 {
		yy := y(float64(c.ProcessAnon))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333" stroke-dasharray="2,3"/>`+"\n", left, yy, x(tmax), yy)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#333" font-size="12">process peak RssAnon %s</text>`+"\n", x(tmax)-4, yy-4, mib(c.ProcessAnon))
	}
	if c.PeakBytes > 0 {
		px := x(c.PeakTime)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d62728" stroke-width="1.5" stroke-dasharray="6,4"/>`+"\n", px, top, px, barsBottom)
		anchor, dx := "start", 6.0
		if px > left+plotW*0.7 {
			anchor, dx = "end", -6
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s" fill="#d62728" font-weight="bold">peak %s at %.2f s</text>`+"\n", px+dx, top+14, anchor, mib(c.PeakBytes), c.PeakTime)
	}
	c.writeSnapshots(&b, x, y, tmax)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", left, areaBottom, x(tmax), areaBottom)
	// Faults per interval.
	fmax := slices.Max(append(slices.Clone(c.Faults), 1))
	bw := plotW / float64(n)
	for k, f := range c.Faults {
		if f == 0 {
			continue
		}
		h := float64(barsBottom-barsTop) * float64(f) / float64(fmax)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.2f" height="%.1f" fill="#555"/>`+"\n", left+bw*float64(k), barsBottom-h, math.Max(bw, 0.8), h)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#333">faults per %s (max %d)</text>`+"\n", left, barsTop-6, duration(tmax/float64(n)), fmax)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", left, barsBottom, x(tmax), barsBottom)
	// The time axis.
	ts := niceStep(tmax)
	for t := 0.0; t <= tmax+ts/1e6; t += ts {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000"/>`+"\n", x(t), barsBottom, x(t), barsBottom+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(t), barsBottom+20, trimFloat(t))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">time (s)</text>`+"\n", left+plotW/2, barsBottom+42)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSnapshots marks each page-table read at what the process held of
// its own then: a ring while it ran, a dot as it exited.
func (c *Chart) writeSnapshots(b *strings.Builder, x, y func(float64) float64, tmax float64) {
	if len(c.Snapshots) == 0 {
		return
	}
	for _, sp := range c.Snapshots {
		if sp.Time > tmax {
			continue
		}
		fill := "#ffffff"
		if sp.Exit {
			fill = "#000000"
		}
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s" stroke="#000" stroke-width="1"><title>page tables at %.3f s: %s</title></circle>`+"\n",
			x(sp.Time), y(float64(sp.Bytes)), fill, sp.Time, mib(sp.Bytes))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="#333" font-size="12">○ page tables read (the process's own memory), ● at its exit</text>`+"\n", left, top-6)
}

// WriteHTML writes the chart as an HTML page holding the SVG.
func (c *Chart) WriteHTML(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head>\n<body style=\"margin:0;background:#fff\">\n", esc(c.Title)); err != nil {
		return err
	}
	if err := c.WriteSVG(w); err != nil {
		return err
	}
	_, err := io.WriteString(w, "</body></html>\n")
	return err
}

// niceStep is a 1, 2 or 5 × 10^k step giving about 5 to 10 ticks over v.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	raw := v / 6
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func duration(s float64) string {
	if s < 1 {
		return trimFloat(s*1e3) + " ms"
	}
	return trimFloat(s) + " s"
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func esc(s string) string { return html.EscapeString(s) }
