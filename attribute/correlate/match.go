package correlate

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"time"
)

// Kind is how a fault was matched to an access.
type Kind uint8

// Match kinds, as the pairs file and the profile's match label spell them.
const (
	MatchNone Kind = iota // unmatched
	MatchIP               // same page and the access's ip is the fault's
	MatchPage             // same page and time (or order)
)

var kindNames = [...]string{"none", "ip", "page"}

func (k Kind) String() string { return kindNames[k] }

// Reason says why a fault is unmatched.
type Reason uint8

// Reasons for an unmatched fault.
const (
	ReasonNone      Reason = iota // matched
	ReasonThread                  // the fault's thread is not in the access log
	ReasonNoAccess                // no access to the fault's page in the access log
	ReasonOnlyAfter               // the page's accesses all come after the fault (and its window)
	ReasonWindow                  // accesses before the fault, but earlier than the window
	ReasonExplained               // every access to the page is explained by an earlier fault
	ReasonType                    // accesses to the page, none of a kind that makes this fault (a write fault needs a write; fetches are not logged)
)

var reasonText = [...]string{
	"",
	"a thread the access log does not cover",
	"no access to that page in the log",
	"accesses only after the fault",
	"accesses before the fault, outside the window",
	"accesses all explained by earlier faults",
	"no access of the fault's kind (write fault, read access; or an instruction fetch)",
}

func (r Reason) String() string { return reasonText[r] }

// Pair is a fault and the access that caused it.
type Pair struct {
	Fault  *Fault
	Access Access // valid when Kind != MatchNone
	Kind   Kind
	Reason Reason
}

// Options steer matching.
type Options struct {
	PageSize uint64 // 4096 when 0
	// Offset, when OffsetSet, is fault time − access time for the same
	// instant (ns); otherwise it is estimated.
	Offset    int64
	OffsetSet bool
	// Window is how far before (and, for clock jitter, after) a fault an
	// access may lie; estimated when 0.
	Window time.Duration
	// Threads: "auto" (use the access log's thread ids when they are the
	// fault log's), "match" (always), "ignore" (never).
	Threads string
	// MinExact is the number of exact (ip+page) matches below which they
	// are called rare and the offset comes from page matches; 3 when 0.
	// Fewer than a tenth of the order pass's matches are rare too.
	MinExact int
	// Progress, when set, is called with the access log bytes read so far.
	Progress func(pass int, bytes int64)
}

// Result is the outcome of a correlation.
type Result struct {
	Pairs  []Pair // one per fault, in fault time order
	Layout AccessLayout
	// Accesses counts the access log's lines; OnFaultPages those on a
	// page some fault touched.
	Accesses, OnFaultPages uint64
	Passes                 int    // how often the access log was read
	Mode                   string // "time" or "order"
	// Offset and Window as used; OffsetFrom says where the offset came
	// from: "given", "ip" (median over exact matches), "page" (median over
	// first touches, exact matches being rare), or "" (no times).
	Offset     int64
	Window     time.Duration
	OffsetFrom string
	// OffsetSpread is the median absolute deviation of the estimate's
	// samples (ns); OffsetSamples their number.
	OffsetSpread  int64
	OffsetSamples int
	// ExactRare: fewer exact matches in the order pass than
	// Options.MinExact or than a tenth of its matches (typical under Pin,
	// whose code cache runs the faulting copy).
	ExactRare bool
	// OrderExact counts the order pass's exact matches.
	OrderExact int
	// Threads says whether thread ids were compared, and why not.
	Threads   bool
	ThreadMsg string
	Warnings  []string
}

// counts sums the pairs by kind and reason.
func (r *Result) counts() (byKind [3]int, byReason [7]int) {
	for i := range r.Pairs {
		byKind[r.Pairs[i].Kind]++
		byReason[r.Pairs[i].Reason]++
	}
	return
}

// AccessSource opens the access log for a pass. A source that can be
// read only once (a pipe) returns ErrOnce on the second call.
type AccessSource func(pass int) (io.Reader, error)

// ErrOnce is returned by an AccessSource that cannot be read again.
var ErrOnce = errors.New("the access log can be read only once")

// pageFaults are one page's faults, sorted by time.
type pageFaults struct {
	times []int64
	idx   []int32 // into the fault log
	cur   int32   // order pass: the first fault not yet decided
	seen  bool    // some access touched the page
	maxT  int64   // time pass: the latest access, in the fault clock
}

// cand is what the time pass keeps per fault: per tier (0: same ip and
// byte address, anywhere after the previous fault on the page; 1: same ip,
// within the window; 2: same page, within the window) the last access
// before the fault and the first after it.
type cand struct {
	acc             [3][2]Access
	has             [3][2]bool
	sawOld, sawType bool
}

// Run matches the faults of log against the access log.
func Run(log *FaultLog, src AccessSource, opt Options) (*Result, error) {
	if opt.PageSize == 0 {
		opt.PageSize = 4096
	}
	if opt.PageSize&(opt.PageSize-1) != 0 {
		return nil, fmt.Errorf("page size %d is not a power of two", opt.PageSize)
	}
	if opt.MinExact == 0 {
		opt.MinExact = 3
	}
	shift := uint(0)
	for 1<<shift < opt.PageSize {
		shift++
	}
	res := &Result{Pairs: make([]Pair, len(log.Faults))}
	pages := map[uint64]*pageFaults{}
	faultTids := map[uint32]bool{}
	for i := range log.Faults {
		f := &log.Faults[i]
		res.Pairs[i].Fault = f
		faultTids[f.Tid] = true
		pg := f.Addr >> shift
		p := pages[pg]
		if p == nil {
			p = &pageFaults{maxT: math.MinInt64}
			pages[pg] = p
		}
		p.times = append(p.times, f.Time)
		p.idx = append(p.idx, int32(i))
	}

	m := &matcher{log: log, res: res, pages: pages, shift: shift, faultTids: faultTids, opt: &opt, accessTids: map[uint32]bool{}}
	r, err := src(1)
	if err != nil {
		return nil, err
	}
	// Pass 1: order matching (no clocks needed). With the offset given,
	// the time matching runs in the same pass, so a pipe is enough.
	fn := m.orderAccess
	if opt.OffsetSet {
		m.estimate()
		m.cands = make([]cand, len(log.Faults))
		fn = func(p *pageFaults, a *Access) {
			m.orderAccess(p, a)
			if m.layout.Time {
				m.timeAccess(p, a)
			}
		}
	}
	if err := m.pass(r, 1, fn); err != nil {
		return nil, err
	}
	res.Passes = 1
	res.Accesses = m.accesses
	res.OnFaultPages = m.onPages
	res.Layout = m.layout
	matched := 0
	for i := range res.Pairs {
		if res.Pairs[i].Kind != MatchNone {
			matched++
		}
		if res.Pairs[i].Kind == MatchIP {
			res.OrderExact++
		}
	}
	res.ExactRare = res.OrderExact < opt.MinExact || res.OrderExact*10 < matched
	if !m.layout.Time {
		res.Mode = "order"
		m.cands = nil
		m.finishReasons()
		return res, nil
	}
	if opt.OffsetSet {
		m.resetPairs()
		m.timeFinish()
		res.Mode = "time"
		return res, nil
	}
	// Clock offset and window.
	m.estimate()
	r2, err := src(2)
	if errors.Is(err, ErrOnce) {
		res.Mode = "order"
		res.Warnings = append(res.Warnings, "the access log cannot be read twice (a pipe): matched in log order, the offset checked afterwards; give the access log as a file, or the offset (--offset), for matching by time")
		m.checkOrderWindow()
		m.finishReasons()
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	// Pass 2: time matching with the offset.
	m.resetPairs()
	for _, p := range pages {
		p.seen, p.maxT = false, math.MinInt64
	}
	m.cands = make([]cand, len(log.Faults))
	m.accesses, m.onPages = 0, 0
	if err := m.pass(r2, 2, m.timeAccess); err != nil {
		return nil, err
	}
	m.timeFinish()
	res.Passes = 2
	res.Mode = "time"
	return res, nil
}

// resetPairs forgets the order pass's matches before the time pass's.
func (m *matcher) resetPairs() {
	for i := range m.res.Pairs {
		m.res.Pairs[i].Kind, m.res.Pairs[i].Access, m.res.Pairs[i].Reason = MatchNone, Access{}, ReasonNone
	}
}

type matcher struct {
	log        *FaultLog
	res        *Result
	opt        *Options
	pages      map[uint64]*pageFaults
	shift      uint
	faultTids  map[uint32]bool
	accessTids map[uint32]bool
	lastTid    uint32 // the last access's thread, already in accessTids
	layout     AccessLayout
	useTids    bool
	decided    bool
	accesses   uint64
	onPages    uint64
	cands      []cand
	window     int64
	// Pass 1's check that the access log is in time order.
	lastTime, firstBackward int64
	backward                uint64
}

// jitter is how far before the previous fault on its page an access may
// seem to lie and still be a candidate: both logs commonly print
// microseconds, so an access made right after a fault can look up to 2 µs
// older in the fault clock. The nearest access wins, so an access that
// explained the previous fault loses to the one that came after it.
const jitter = 2000

// maxOffers bounds the faults of one page an access is offered to, the
// first whose windows hold it: one access causes at most one fault, and
// without a bound a page faulted many times within one window (a hostile
// log: 400k faults at one timestamp) costs faults × accesses.
const maxOffers = 64

// exactWindowFactor widens the window before a fault for accesses at its
// ip and exact byte.
const exactWindowFactor = 100

// maxTids bounds the set of access-log thread ids kept for the summary.
const maxTids = 1 << 16

func (m *matcher) pass(r io.Reader, n int, fn func(p *pageFaults, a *Access)) error {
	ar := newAccessReader(r)
	for ar.Next() {
		a := ar.Access()
		m.accesses++
		if m.accesses&0xffff == 0 && m.opt.Progress != nil {
			m.opt.Progress(n, ar.Bytes)
		}
		if !m.decided {
			m.decide(ar.Layout(), a.Tid)
		}
		if n == 1 && m.layout.Time {
			m.checkOrder(a)
		}
		if m.layout.Tid && (a.Tid != m.lastTid || m.accesses == 1) && len(m.accessTids) < maxTids {
			m.accessTids[a.Tid] = true
			m.lastTid = a.Tid
		}
		p := m.pages[a.Addr>>m.shift]
		if p == nil {
			continue
		}
		m.onPages++
		p.seen = true
		fn(p, a)
	}
	if err := ar.Err(); err != nil {
		return err
	}
	if n > 1 {
		return nil // pass 1 said it all
	}
	if ar.Truncated {
		m.res.Warnings = append(m.res.Warnings, "access log: the last line is cut short; skipped")
	}
	if !m.decided {
		m.res.Warnings = append(m.res.Warnings, "access log: no accesses")
	}
	if m.backward > 0 {
		m.res.Warnings = append(m.res.Warnings, fmt.Sprintf("access log: its time goes backwards %d times by more than %v (first at line %d): correlate reads it as a log in time order, so its log-order matches and clock offset are unreliable; sort it by time (sort -s -n) or give --offset", m.backward, time.Duration(backwardSlack), m.firstBackward))
	}
	return nil
}

// backwardSlack is how far an access log's time may step back without a
// warning: threads writing one log interleave lines stamped a little
// apart.
const backwardSlack = int64(time.Millisecond)

// checkOrder counts the steps back in time of the access log (pass 1).
func (m *matcher) checkOrder(a *Access) {
	if m.accesses > 1 && a.Time < m.lastTime-backwardSlack {
		if m.backward == 0 {
			m.firstBackward = a.Line
		}
		m.backward++
	}
	m.lastTime = max(m.lastTime, a.Time)
}

// decide settles, at the first access, whether thread ids are compared.
func (m *matcher) decide(l AccessLayout, tid uint32) {
	m.decided, m.layout = true, l
	switch {
	case !l.Tid:
		m.res.ThreadMsg = "the access log has no thread ids"
	case m.opt.Threads == "ignore":
		m.res.ThreadMsg = "--threads ignore"
	case m.opt.Threads == "match" || m.faultTids[tid]:
		m.useTids = true
	default:
		// Pin's own THREADID numbers threads 0, 1, 2, ...: not the kernel's.
		m.res.ThreadMsg = fmt.Sprintf("the access log's first thread id %d is no thread of the fault log (Pin numbers threads from 0?); --threads match forces comparing them", tid)
	}
	m.res.Threads = m.useTids
}

// compatible reports whether access a can have caused fault f: a write
// fault needs a write (a read would have faulted as a read); a read fault
// needs a read; fetches are never in an access log.
func compatible(f *Fault, a *Access) bool {
	if !f.HasCode {
		return true
	}
	switch {
	case f.Code&0x10 != 0:
		return false
	case f.Code&0x2 != 0:
		return a.Write
	}
	return !a.Write
}

// orderAccess is pass 1: per page, faults are explained in time order by
// accesses in log order. An access at a pending fault's ip and exact byte
// address (the kernel reports the byte that faulted; looking a few faults
// ahead) settles that fault and the ones before it. Otherwise the current
// fault takes the first compatible access at its ip, else the first
// compatible access at all; once it has one, a compatible access for the
// next fault moves on to that one.
func (m *matcher) orderAccess(p *pageFaults, a *Access) {
	const lookahead = 8
	n := int32(len(p.idx))
	for j := p.cur; j < n && j < p.cur+lookahead; j++ {
		pr := &m.res.Pairs[p.idx[j]]
		if f := pr.Fault; f.IP == a.IP && f.Addr == a.Addr && m.usable(f, a) {
			pr.Kind, pr.Access = MatchIP, *a
			p.cur = j + 1
			return
		}
	}
	if p.cur >= n {
		return
	}
	pr := &m.res.Pairs[p.idx[p.cur]]
	if m.usable(pr.Fault, a) {
		switch {
		case pr.Fault.IP == a.IP && pr.Kind != MatchIP:
			pr.Kind, pr.Access = MatchIP, *a
			return
		case pr.Kind == MatchNone:
			pr.Kind, pr.Access = MatchPage, *a
			return
		}
	}
	if pr.Kind != MatchNone && p.cur+1 < n {
		next := &m.res.Pairs[p.idx[p.cur+1]]
		if m.usable(next.Fault, a) {
			p.cur++
			next.Kind, next.Access = MatchPage, *a
			if next.Fault.IP == a.IP {
				next.Kind = MatchIP
			}
		}
	}
}

// usable reports whether access a may have caused fault f: the same thread
// when threads are compared, and a compatible kind.
func (m *matcher) usable(f *Fault, a *Access) bool {
	return !(m.useTids && f.Tid != a.Tid) && compatible(f, a)
}

// estimate sets the offset and window from the order pass (or the options).
func (m *matcher) estimate() {
	res := m.res
	var d []int64
	kind := MatchIP
	if res.ExactRare {
		kind = MatchPage
	}
	collect := func(kind Kind) {
		for i := range res.Pairs {
			if pr := &res.Pairs[i]; pr.Kind == kind {
				d = append(d, pr.Fault.Time-pr.Access.Time)
			}
		}
	}
	collect(kind)
	if len(d) == 0 && kind == MatchPage {
		// Exact matches are rare, but there is nothing else.
		kind = MatchIP
		collect(kind)
	}
	switch {
	case m.opt.OffsetSet:
		res.Offset, res.OffsetFrom = m.opt.Offset, "given"
	case len(d) > 0:
		res.Offset, res.OffsetFrom = median(d), kind.String()
	case m.onPages == 0:
		res.OffsetFrom = "none"
		res.Warnings = append(res.Warnings, "no fault's page appears in the access log: no clock offset can be estimated; give --offset")
	default:
		res.OffsetFrom = "none"
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d accesses touch faulted pages, but none can have caused a fault (other threads, or reads where the faults are writes): no clock offset can be estimated; give --offset", m.onPages))
	}
	res.OffsetSamples = len(d)
	dev := make([]int64, len(d))
	for i, v := range d {
		dev[i] = abs(v - res.Offset)
	}
	if len(dev) > 0 {
		res.OffsetSpread = median(dev)
	}
	w := int64(m.opt.Window)
	if w == 0 && m.opt.OffsetSet {
		w = int64(time.Millisecond) // a given offset is seldom exact to µs
	}
	if w == 0 {
		// Four times the deviation of 90% of the estimate's samples: the
		// order pass's exact matches include a few wrong ones (a page that
		// faults again matched to a repeat access at the same ip), so not
		// the largest deviations; at least 50 µs (timestamps have µs
		// resolution), at most 100 ms.
		w = 4 * percentile(dev, 0.90)
		w = max(w, int64(50*time.Microsecond))
		w = min(w, int64(100*time.Millisecond))
	}
	m.window = w
	res.Window = time.Duration(w)
}

// checkOrderWindow (one pass, with times) unmatches order-pass pairs whose
// access lies outside the window around the fault.
func (m *matcher) checkOrderWindow() {
	if m.res.OffsetFrom == "none" {
		return
	}
	for i := range m.res.Pairs {
		pr := &m.res.Pairs[i]
		if pr.Kind == MatchNone {
			continue
		}
		t := pr.Access.Time + m.res.Offset
		if t < pr.Fault.Time-m.window {
			pr.Kind, pr.Reason = MatchNone, ReasonWindow
		} else if t > pr.Fault.Time+m.window {
			pr.Kind, pr.Reason = MatchNone, ReasonOnlyAfter
		}
	}
}

// timeAccess is pass 2: the access, at its time in the fault clock, is a
// candidate for the page's faults whose window holds it.
func (m *matcher) timeAccess(p *pageFaults, a *Access) {
	t := a.Time + m.res.Offset
	w := m.window
	p.maxT = max(p.maxT, t)
	n := len(p.times)
	// The first fault whose window's end is at or after t.
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if p.times[mid]+w >= t {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	j := lo
	if j == n {
		return // after every fault's window on this page
	}
	// An access at a fault's ip and exact byte is a candidate from
	// exactWindowFactor windows before the fault (after the previous fault
	// on the page): the thread may have been preempted between logging the
	// access and making it, and the nearest one wins in the end anyway.
	for k := j; k < n && k < j+maxOffers && (k == j || t > p.times[k-1]-jitter); k++ {
		f := &m.log.Faults[p.idx[k]]
		if (k == 0 || t > p.times[k-1]-jitter) && t >= f.Time-exactWindowFactor*w && a.IP == f.IP && a.Addr == f.Addr && m.usable(f, a) {
			after := 0
			if t > f.Time {
				after = 1
			}
			m.offer(&m.cands[p.idx[k]], 0, after, a)
		}
	}
	if t < p.times[j]-w {
		// Between the previous fault and this one's window.
		if j == 0 || t > p.times[j-1]-jitter {
			m.cands[p.idx[j]].sawOld = true
		}
		return
	}
	for end := min(n, j+maxOffers); j < end && p.times[j]-w <= t; j++ {
		c := &m.cands[p.idx[j]]
		f := &m.log.Faults[p.idx[j]]
		if j > 0 && t <= p.times[j-1]-jitter {
			continue // explained by (or before) the previous fault
		}
		if m.useTids && f.Tid != a.Tid {
			continue
		}
		if !compatible(f, a) {
			c.sawType = true
			continue
		}
		after := 0
		if t > f.Time {
			after = 1
		}
		m.offer(c, 2, after, a)
		if a.IP == f.IP {
			m.offer(c, 1, after, a)
		}
	}
}

// offer keeps a if it is the last access before the fault (after == 0) or
// the first after it (after == 1) in its tier.
func (m *matcher) offer(c *cand, tier, after int, a *Access) {
	cur := &c.acc[tier][after]
	if !c.has[tier][after] || after == 0 && a.Time >= cur.Time || after == 1 && a.Time < cur.Time {
		*cur, c.has[tier][after] = *a, true
	}
}

func (m *matcher) timeFinish() {
	for i := range m.res.Pairs {
		pr := &m.res.Pairs[i]
		c := &m.cands[i]
		tier := 0
		for tier < 3 && !c.has[tier][0] && !c.has[tier][1] {
			tier++
		}
		switch {
		case tier < 3:
			pr.Kind, pr.Access = MatchIP, m.closer(pr.Fault.Time, c, tier)
			if tier == 2 {
				pr.Kind = MatchPage
			}
		}
	}
	m.finishReasons()
}

// closer picks, of a tier's last access before the fault and first after
// it, the one nearer the fault in the fault clock, counting time after the
// fault afterWeight times: the causing access is logged before the fault,
// sometimes well before (the thread preempted, or faulting in its own
// logging), while only clock jitter of a microsecond or two puts it after.
func (m *matcher) closer(tf int64, c *cand, tier int) Access {
	before, after := &c.acc[tier][0], &c.acc[tier][1]
	switch {
	case !c.has[tier][0]:
		return *after
	case !c.has[tier][1]:
		return *before
	}
	if afterWeight*abs(after.Time+m.res.Offset-tf) < abs(tf-before.Time-m.res.Offset) {
		return *after
	}
	return *before
}

// afterWeight: see closer.
const afterWeight = 4

// finishReasons names the reason of every unmatched fault: the first that
// applies of thread, no access, kind, window, only after, explained.
func (m *matcher) finishReasons() {
	for i := range m.res.Pairs {
		pr := &m.res.Pairs[i]
		if pr.Kind != MatchNone {
			pr.Reason = ReasonNone
			continue
		}
		f := pr.Fault
		p := m.pages[f.Addr>>m.shift]
		var c *cand
		if m.cands != nil {
			c = &m.cands[i]
		}
		switch {
		case m.useTids && len(m.accessTids) < maxTids && !m.accessTids[f.Tid]:
			pr.Reason = ReasonThread
		case !p.seen:
			pr.Reason = ReasonNoAccess
		case f.HasCode && f.Code&0x10 != 0 || c != nil && c.sawType:
			pr.Reason = ReasonType
		case pr.Reason != ReasonNone:
			// Set by the one-pass window check.
		case c != nil && c.sawOld:
			pr.Reason = ReasonWindow
		case c != nil && p.maxT > f.Time+m.window:
			pr.Reason = ReasonOnlyAfter
		case m.prevUnmatched(p, i):
			// Accesses come before the previous fault, which is not
			// matched either: the clocks disagree more than the window.
			pr.Reason = ReasonWindow
		default:
			pr.Reason = ReasonExplained
		}
	}
}

// prevUnmatched reports whether the fault before fault i on its page is
// unmatched (false when i is the page's first).
func (m *matcher) prevUnmatched(p *pageFaults, i int) bool {
	// p.idx ascends: Run appends the faults in log order. A search by
	// time would scan every fault of the same time (quadratic on a page
	// faulted many times at one timestamp).
	k := sort.Search(len(p.idx), func(k int) bool { return p.idx[k] >= int32(i) })
	return k > 0 && k < len(p.idx) && p.idx[k] == int32(i) && m.res.Pairs[p.idx[k-1]].Kind == MatchNone
}

func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return s[len(s)/2-1] + (s[len(s)/2]-s[len(s)/2-1])/2
}

func percentile(v []int64, q float64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
