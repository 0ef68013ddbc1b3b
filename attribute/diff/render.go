package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/faultline/faultline/attribute/report"
)

// Formats are the output formats Render accepts.
var Formats = []string{"text", "markdown", "json"}

// RenderOptions configures Render.
type RenderOptions struct {
	// Top limits each site table of the text and Markdown output; 0 shows
	// every site. JSON always lists every site.
	Top int
	// BaseName and NewName name the inputs in the output (file names).
	BaseName, NewName string
}

// Render writes r in format "text", "markdown" or "json".
func Render(w io.Writer, r *Result, format string, opts RenderOptions) error {
	switch format {
	case "text", "":
		return renderText(w, r, opts)
	case "markdown":
		return renderMarkdown(w, r, opts)
	case "json":
		return renderJSON(w, r, opts)
	}
	return fmt.Errorf("unknown format %q (want %s)", format, strings.Join(Formats, ", "))
}

// Verdict is the one-line conclusion, e.g. "REGRESSION: 2 sites grew by
// more than 10% and by at least 8 faults".
func (r *Result) Verdict() string {
	rule := fmt.Sprintf("by more than %s and by at least %s", percent(r.Threshold), r.quantity(r.MinDelta))
	switch r.Regressions {
	case 0:
		return "OK: no site grew " + rule
	case 1:
		return "REGRESSION: 1 site grew " + rule
	}
	return fmt.Sprintf("REGRESSION: %d sites grew %s", r.Regressions, rule)
}

// quantity formats an absolute amount with its unit, e.g. "8 faults".
func (r *Result) quantity(v int64) string {
	if r.Unit == report.UnitBytes {
		return report.FormatBytes(v)
	}
	return fmt.Sprintf("%d %s", v, r.Metric)
}

// value formats one cell.
func (r *Result) value(v int64) string {
	if r.Unit == report.UnitBytes {
		return report.FormatBytes(v)
	}
	return strconv.FormatInt(v, 10)
}

// delta formats a signed change.
func (r *Result) delta(v int64) string {
	switch {
	case v > 0:
		return "+" + r.value(v)
	case v == math.MinInt64:
		return r.value(v)
	case v < 0:
		return "-" + r.value(-v)
	}
	return r.value(0)
}

// growthString formats a Row's relative change: "+12.5%", "new", "0.0%".
func growthString(row Row) string {
	g := row.growth()
	if math.IsInf(g, 0) {
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", g*100)
}

// percent formats a threshold fraction: 0.1 → "10%".
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1e6)/1e4, 'f', -1, 64) + "%"
}

// ungatedNote says how many unattributed classes grew past the rule
// without failing the comparison; "" when none did.
func (r *Result) ungatedNote() string {
	switch r.UngatedClasses {
	case 0:
		return ""
	case 1:
		return "(1 unattributed class grew past the rule; classes are not gated: --gate-classes to include them)"
	}
	return fmt.Sprintf("(%d unattributed classes grew past the rule; classes are not gated: --gate-classes to include them)", r.UngatedClasses)
}

func (r *Result) newSites() []Site      { return r.filter(StatusNew) }
func (r *Result) vanishedSites() []Site { return r.filter(StatusVanished) }

func (r *Result) filter(st Status) []Site {
	var out []Site
	for _, s := range r.Sites {
		if s.Status == st {
			out = append(out, s)
		}
	}
	return out
}

// changed returns the sites whose value changed, largest change first.
func (r *Result) changed() []Site {
	var out []Site
	for _, s := range r.Sites {
		if s.Status != StatusSame {
			out = append(out, s)
		}
	}
	return out
}

func top(s []Site, n int) (shown []Site, more int) {
	if n <= 0 || len(s) <= n {
		return s, 0
	}
	return s[:n], len(s) - n
}

func renderText(w io.Writer, r *Result, opts RenderOptions) error {
	var b strings.Builder
	fmt.Fprintf(&b, "faultline diff: %s (%s)\n", r.Metric, r.Unit)
	fmt.Fprintf(&b, "BASE %s\nNEW  %s\n", opts.BaseName, opts.NewName)
	if r.Bases > 1 {
		fmt.Fprintf(&b, "BASE is the mean of %d baselines; a site's spread over them (NOISE) is its noise floor\n", r.Bases)
	}
	b.WriteString("\n")
	for _, l := range r.Losses {
		fmt.Fprintf(&b, "warning: %s\n", l)
	}
	if len(r.Losses) > 0 {
		b.WriteString("\n")
	}

	// tabwriter aligns every column right; the name column is padded
	// here so it reads left-aligned.
	width := len("unattributed")
	for _, f := range r.Flags {
		width = max(width, len("flag=")+len(f.Flag))
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tBASE\tNEW\tDELTA\tDELTA%%\t\n", width, "")
	row := func(name string, row Row) {
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t\n", width, name, r.value(row.Base), r.value(row.New), r.delta(row.delta()), growthString(row))
	}
	row("total", r.Total)
	row("unattributed", r.Unattributed)
	for _, f := range r.Flags {
		row("flag="+f.Flag, f.Row)
	}
	tw.Flush()

	sites := func(title string, list []Site) {
		shown, more := top(list, opts.Top)
		fmt.Fprintf(&b, "\n%s (%d):\n", title, len(list))
		if len(list) == 0 {
			return
		}
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		noise := func(s Site) string { return "" }
		if r.Bases > 1 {
			noise = func(s Site) string { return r.value(s.Noise) + "\t" }
			fmt.Fprintf(tw, "NOISE\t")
		}
		fmt.Fprintf(tw, "BASE\tNEW\tDELTA\tDELTA%%\t    SITE\n")
		for _, s := range shown {
			mark := "    "
			if s.Regressed {
				mark = "  ! "
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s%s\n", noise(s), r.value(s.Base), r.value(s.New), r.delta(s.delta()), growthString(s.Row), mark, s.Name)
		}
		tw.Flush()
		if more > 0 {
			fmt.Fprintf(&b, "  ... and %d more\n", more)
		}
	}
	sites("Sites by absolute change", r.changed())
	sites("New sites", r.newSites())
	sites("Vanished sites", r.vanishedSites())
	if r.Unmatched > 0 {
		sites("Unmatched calls (BASE's and NEW's calls of a function that could not be paired one to one, summed)", r.filter(StatusUnmatched))
	}

	fmt.Fprintf(&b, "\n%s\n", r.Verdict())
	if r.Regressed() {
		b.WriteString("(sites marked ! regressed)\n")
	}
	if note := r.ungatedNote(); note != "" {
		b.WriteString(note + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdCode puts s in a Markdown code span that is safe inside a table cell.
func mdCode(s string) string {
	s = strings.ReplaceAll(s, "`", "'")
	s = strings.ReplaceAll(s, "|", `\|`)
	return "`" + s + "`"
}

func renderMarkdown(w io.Writer, r *Result, opts RenderOptions) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### faultline diff: %s\n\n", r.Metric)
	if r.Regressed() {
		fmt.Fprintf(&b, "**%s**\n\n", r.Verdict())
	} else {
		fmt.Fprintf(&b, "%s\n\n", r.Verdict())
	}
	for _, l := range r.Losses {
		fmt.Fprintf(&b, "> **Warning:** %s\n", l)
	}
	if len(r.Losses) > 0 {
		b.WriteString("\n")
	}

	b.WriteString("| | BASE | NEW | Δ | Δ% |\n|:--|--:|--:|--:|--:|\n")
	row := func(name string, row Row) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, r.value(row.Base), r.value(row.New), r.delta(row.delta()), growthString(row))
	}
	row("**total**", r.Total)
	row("unattributed", r.Unattributed)
	for _, f := range r.Flags {
		row("flag "+mdCode(f.Flag), f.Row)
	}

	changed, more := top(r.changed(), opts.Top)
	b.WriteString("\n#### Top sites by absolute change\n\n")
	if len(changed) == 0 {
		b.WriteString("No site changed.\n")
	} else {
		noiseHead, noiseCol, noise := "", "", func(Site) string { return "" }
		if r.Bases > 1 {
			noiseHead, noiseCol = " noise |", "--:|"
			noise = func(s Site) string { return " " + r.value(s.Noise) + " |" }
		}
		fmt.Fprintf(&b, "| site | BASE | NEW | Δ | Δ%% |%s |\n|:--|--:|--:|--:|--:|%s:--|\n", noiseHead, noiseCol)
		for _, s := range changed {
			verdict := ""
			if s.Regressed {
				verdict = "**regression**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |%s %s |\n", mdCode(s.Name), r.value(s.Base), r.value(s.New), r.delta(s.delta()), growthString(s.Row), noise(s), verdict)
		}
		if more > 0 {
			fmt.Fprintf(&b, "\n… and %d more.\n", more)
		}
	}

	list := func(title, col string, all []Site, val func(Site) int64) {
		if len(all) == 0 {
			return
		}
		shown, more := top(all, opts.Top)
		fmt.Fprintf(&b, "\n#### %s (%d)\n\n| site | %s |\n|:--|--:|\n", title, len(all), col)
		for _, s := range shown {
			fmt.Fprintf(&b, "| %s | %s |\n", mdCode(s.Name), r.value(val(s)))
		}
		if more > 0 {
			fmt.Fprintf(&b, "\n… and %d more.\n", more)
		}
	}
	list("New sites", "NEW", r.newSites(), func(s Site) int64 { return s.New })
	list("Vanished sites", "BASE", r.vanishedSites(), func(s Site) int64 { return s.Base })
	if r.Unmatched > 0 {
		fmt.Fprintf(&b, "\n%d sites are calls of one function whose BASE and NEW sides could not be paired one to one: each shows both sides' sums and regresses only as a whole.\n", r.Unmatched)
	}

	if note := r.ungatedNote(); note != "" {
		fmt.Fprintf(&b, "\n%s\n", note)
	}
	if r.Bases > 1 {
		fmt.Fprintf(&b, "\n<sub>BASE is the mean of %d baselines (%s), NEW %s; a site regresses when it grows by more than %s, by at least %s and by more than its noise floor, the spread (largest minus smallest) of its value over the baselines.</sub>\n",
			r.Bases, mdCode(opts.BaseName), mdCode(opts.NewName), percent(r.Threshold), r.quantity(r.MinDelta))
	} else {
		fmt.Fprintf(&b, "\n<sub>BASE %s, NEW %s; a site regresses when it grows by more than %s and by at least %s.</sub>\n",
			mdCode(opts.BaseName), mdCode(opts.NewName), percent(r.Threshold), r.quantity(r.MinDelta))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// The JSON schema: field names are part of faultline's interface.
type jsonResult struct {
	Base      string  `json:"base"`
	New       string  `json:"new"`
	Metric    string  `json:"metric"`
	Unit      string  `json:"unit"`
	Threshold float64 `json:"threshold"`
	MinDelta  int64   `json:"min_delta"`
	// Key: site, line or raw (--key, --raw-sites).
	Key string `json:"key"`
	// Bases: how many baselines BASE is the mean of.
	Bases       int  `json:"bases"`
	Regression  bool `json:"regression"`
	Regressions int  `json:"regressions"`
	// UngatedClasses: unattributed classes that grew past the rule but
	// are not gated (--gate-classes).
	UngatedClasses int        `json:"ungated_classes"`
	Verdict        string     `json:"verdict"`
	Total          jsonRow    `json:"total"`
	Unattributed   jsonRow    `json:"unattributed"`
	Flags          []jsonFlag `json:"flags"`
	Sites          []jsonSite `json:"sites"`
	// Losses: allocation and fault events an input lost samples of.
	Losses []jsonLoss `json:"losses"`
}

type jsonLoss struct {
	Input   string  `json:"input"`
	Event   string  `json:"event"`
	Role    string  `json:"role"`
	Samples uint64  `json:"samples"`
	Lost    uint64  `json:"lost"`
	Percent float64 `json:"lost_percent"`
}

type jsonRow struct {
	Base  int64 `json:"base"`
	New   int64 `json:"new"`
	Delta int64 `json:"delta"`
	// Growth is Delta/Base; null when Base is 0.
	Growth *float64 `json:"growth"`
}

type jsonFlag struct {
	Flag string `json:"flag"`
	jsonRow
}

type jsonFrame struct {
	Function string `json:"function"`
	File     string `json:"file,omitempty"`
	Line     int64  `json:"line,omitempty"`
}

type jsonSite struct {
	Site   string      `json:"site"`
	Class  string      `json:"class,omitempty"`
	Frames []jsonFrame `json:"frames,omitempty"`
	jsonRow
	// Noise: the site's spread over the baselines, its noise floor.
	Noise      int64  `json:"noise"`
	Status     Status `json:"status"`
	Regression bool   `json:"regression"`
}

func toJSONRow(r Row) jsonRow {
	j := jsonRow{Base: r.Base, New: r.New, Delta: r.delta()}
	if r.Base != 0 {
		g := r.growth()
		j.Growth = &g
	}
	return j
}

func renderJSON(w io.Writer, r *Result, opts RenderOptions) error {
	j := jsonResult{
		Base: opts.BaseName, New: opts.NewName,
		Metric: r.Metric, Unit: r.Unit,
		Threshold: r.Threshold, MinDelta: r.MinDelta, Key: string(r.Key), Bases: r.Bases,
		Regression: r.Regressed(), Regressions: r.Regressions, UngatedClasses: r.UngatedClasses, Verdict: r.Verdict(),
		Total: toJSONRow(r.Total), Unattributed: toJSONRow(r.Unattributed),
		Flags: []jsonFlag{}, Sites: []jsonSite{}, Losses: []jsonLoss{},
	}
	for _, l := range r.Losses {
		j.Losses = append(j.Losses, jsonLoss{Input: l.Input, Event: l.Event, Role: l.Role, Samples: l.Samples, Lost: l.Lost, Percent: l.Percent()})
	}
	for _, f := range r.Flags {
		j.Flags = append(j.Flags, jsonFlag{Flag: f.Flag, jsonRow: toJSONRow(f.Row)})
	}
	for _, s := range r.Sites {
		js := jsonSite{Site: s.Name, Class: s.Class, jsonRow: toJSONRow(s.Row), Noise: s.Noise, Status: s.Status, Regression: s.Regressed}
		for _, f := range s.Frames {
			js.Frames = append(js.Frames, jsonFrame(f))
		}
		j.Sites = append(j.Sites, js)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // C++ names: std::vector<int>, not \u003c
	return enc.Encode(j)
}
