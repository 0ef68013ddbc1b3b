package correlate

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/faultline/faultline/attribute/report"
	"github.com/faultline/faultline/symbolize"
	"github.com/google/pprof/profile"
)

// pairsHeader is the header line of the pairs file.
const pairsHeader = "fault_time\tfault_addr\tfault_ip\taccess_time\taccess_ip\taccess_addr\tmatch\tfault_tid\taccess_tid\taccess\tfault_code\treason\n"

// WritePairs writes one tab-separated row per fault: times in seconds
// (each in its own log's clock; access_time empty when the access log has
// none), addresses in hex, empty access columns for unmatched faults.
func WritePairs(w io.Writer, res *Result) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	bw.WriteString(pairsHeader)
	var b []byte
	for i := range res.Pairs {
		pr := &res.Pairs[i]
		f := pr.Fault
		b = appendSeconds(b[:0], f.Time)
		b = append(b, '\t')
		b = appendHex(b, f.Addr)
		b = append(b, '\t')
		b = appendHex(b, f.IP)
		b = append(b, '\t')
		a := &pr.Access
		if pr.Kind != MatchNone {
			if res.Layout.Time {
				b = appendSeconds(b, a.Time)
			}
			b = append(b, '\t')
			b = appendHex(b, a.IP)
			b = append(b, '\t')
			b = appendHex(b, a.Addr)
		} else {
			b = append(b, "\t\t"...)
		}
		b = append(b, '\t')
		b = append(b, pr.Kind.String()...)
		b = append(b, '\t')
		b = strconv.AppendUint(b, uint64(f.Tid), 10)
		b = append(b, '\t')
		if pr.Kind != MatchNone && res.Layout.Tid {
			b = strconv.AppendUint(b, uint64(a.Tid), 10)
		}
		b = append(b, '\t')
		if pr.Kind != MatchNone {
			b = append(b, accessType(a)...)
		}
		b = append(b, '\t')
		if f.HasCode {
			b = appendHex(b, f.Code)
		}
		b = append(b, '\t')
		b = append(b, reasonKey[pr.Reason]...)
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// reasonKey spells reasons in the pairs file and the profile.
var reasonKey = [...]string{"", "thread", "no-access", "only-after", "window", "explained", "kind"}

func accessType(a *Access) string {
	if a.Write {
		return "write"
	}
	return "read"
}

func appendHex(b []byte, v uint64) []byte {
	b = append(b, "0x"...)
	return strconv.AppendUint(b, v, 16)
}

// appendSeconds writes nanoseconds as seconds with 9 decimals.
func appendSeconds(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1e9, 10)
	b = append(b, '.')
	frac := strconv.AppendInt(nil, ns%1e9+1e9, 10)
	return append(b, frac[1:]...)
}

// WriteSummary writes the human summary.
func WriteSummary(w io.Writer, res *Result, log *FaultLog) {
	byKind, byReason := res.counts()
	n := len(res.Pairs)
	pct := func(k int) string {
		if n == 0 {
			return "0.0%"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(k)/float64(n))
	}
	fmt.Fprintf(w, "Faults:      %d (%s", n, log.Format)
	if log.Filtered > 0 {
		fmt.Fprintf(w, "; %d of other programs left out", log.Filtered)
	}
	fmt.Fprintf(w, ")\n")
	fmt.Fprintf(w, "Accesses:    %d lines (%s), %d on faulted pages; read %d time(s)\n", res.Accesses, res.Layout, res.OnFaultPages, res.Passes)
	fmt.Fprintf(w, "  %-22s %8d  %6s\n", "matched by ip+page:", byKind[MatchIP], pct(byKind[MatchIP]))
	fmt.Fprintf(w, "  %-22s %8d  %6s\n", "matched by page+"+res.Mode+":", byKind[MatchPage], pct(byKind[MatchPage]))
	fmt.Fprintf(w, "  %-22s %8d  %6s\n", "unmatched:", byKind[MatchNone], pct(byKind[MatchNone]))
	for r := ReasonThread; int(r) < len(byReason); r++ {
		if byReason[r] > 0 {
			fmt.Fprintf(w, "    %8d  %s\n", byReason[r], r)
		}
	}
	switch res.OffsetFrom {
	case "":
		fmt.Fprintf(w, "Clock:       the access log has no times: matched in log order\n")
	case "none":
		if res.OnFaultPages == 0 {
			fmt.Fprintf(w, "Clock:       no offset (no fault's page is in the access log)\n")
		} else {
			fmt.Fprintf(w, "Clock:       no offset (no access matched a fault)\n")
		}
	case "given":
		fmt.Fprintf(w, "Clock:       offset %s (given), window %s (%s for the same ip and byte)\n", fmtDur(res.Offset), res.Window, exactWindowFactor*res.Window)
	default:
		fmt.Fprintf(w, "Clock:       offset %s (fault time − access time: median of %d %s matches, spread ±%s),\n"+
			"             window %s (%s for the same ip and byte)\n",
			fmtDur(res.Offset), res.OffsetSamples, map[string]string{"ip": "exact ip+page", "page": "first-touch page"}[res.OffsetFrom],
			fmtDur(res.OffsetSpread), res.Window, exactWindowFactor*res.Window)
	}
	if res.ExactRare {
		fmt.Fprintf(w, "Note:        exact ip matches are rare (%d of %d faults in log order): under Pin the faulting\n"+
			"             instruction runs from Pin's code cache, not at the logged ip; matched by page and time\n", res.OrderExact, n)
	}
	if res.Layout.Tid {
		if res.Threads {
			fmt.Fprintf(w, "Threads:     compared\n")
		} else {
			fmt.Fprintf(w, "Threads:     not compared: %s\n", res.ThreadMsg)
		}
	}
}

func fmtDur(ns int64) string {
	d := time.Duration(ns)
	if d < 0 {
		return "-" + (-d).String()
	}
	return d.String()
}

// Symbolizer names access instructions: a symbolize.Session with the
// program's mappings (from the perf.data, or a /proc/PID/maps copy under
// Pid).
type Symbolizer struct {
	Sess *symbolize.Session
	// Pid is the process the mappings were added under; -1: the fault's pid.
	Pid int64
}

// Profile builds a pprof profile: one sample per accessing instruction and
// label set, sample type faults/count. Labels: match (ip, page, none),
// access (the access's read/write), fault (the fault's read/write/exec),
// reason for unmatched faults, whose location is the faulting ip.
func Profile(res *Result, sym *Symbolizer) *profile.Profile {
	p := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "faults", Unit: "count"}},
		DefaultSampleType: "faults",
		PeriodType:        &profile.ValueType{Type: "faults", Unit: "count"},
		Period:            1,
	}
	locs, seen := report.NewLocations(p), map[locKey]*profile.Location{}
	var syms *report.Symbols
	if sym != nil && sym.Sess != nil {
		syms = report.NewSymbols(sym.Sess)
	}
	// location resolves the instruction at pc in pid once.
	location := func(pid uint32, pc uint64) *profile.Location {
		k := locKey{pid, pc}
		if l := seen[k]; l != nil {
			return l
		}
		rl := report.Location{Addr: pc}
		if syms != nil {
			rl = syms.Location(sym.Sess.Locate(pid, pc))
		}
		l := locs.Location(&rl)
		seen[k] = l
		return l
	}
	type key struct {
		loc                   *profile.Location
		kind                  Kind
		access, fault, reason string
	}
	samples := map[key]*profile.Sample{}
	for i := range res.Pairs {
		pr := &res.Pairs[i]
		f := pr.Fault
		k := key{kind: pr.Kind, fault: f.Access.String()}
		pid := f.Pid
		if sym != nil && sym.Pid >= 0 {
			pid = uint32(sym.Pid)
		}
		if pr.Kind == MatchNone {
			k.loc, k.reason = location(pid, f.IP), reasonKey[pr.Reason]
		} else {
			k.loc, k.access = location(pid, pr.Access.IP), accessType(&pr.Access)
		}
		if s := samples[k]; s != nil {
			s.Value[0]++
			continue
		}
		s := &profile.Sample{Value: []int64{1}, Location: []*profile.Location{k.loc}, Label: map[string][]string{"match": {k.kind.String()}}}
		if k.access != "" {
			s.Label["access"] = []string{k.access}
		}
		if k.fault != "" && f.HasCode {
			s.Label["fault"] = []string{k.fault}
		}
		if k.reason != "" {
			s.Label["reason"] = []string{k.reason}
		}
		samples[k] = s
		p.Sample = append(p.Sample, s)
	}
	// Each sample has one location, its accessing or faulting instruction.
	report.MainMappingFirst(p, func(s *profile.Sample) int64 { return s.Value[0] })
	return p
}

type locKey struct {
	pid uint32
	pc  uint64
}
