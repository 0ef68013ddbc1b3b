package correlate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata"
)

// Fault is one user page fault from the fault log.
type Fault struct {
	Time   int64  // nanoseconds in the fault log's clock
	Addr   uint64 // the faulting data address
	IP     uint64 // the faulting instruction
	Pid    uint32 // process id; 0 when the log does not say (ftrace without record-tgid)
	Tid    uint32 // thread id (ftrace's task pid)
	Code   uint64 // x86 error_code, when HasCode
	Access attribute.Access
	// HasCode: the log carries the error code (the tracepoint does,
	// page-faults samples do not).
	HasCode bool
	// Where is the line number (text) or the record's file offset
	// (perf.data).
	Where int64
}

// FaultFilter selects the faults of one program.
type FaultFilter struct {
	Pid  uint32 // keep faults of this process (0: all); ftrace without record-tgid names only the thread, which is compared then
	Comm string // keep faults of this command name ("": all)
}

func (f *FaultFilter) keep(pid, tid uint32, comm []byte) bool {
	if f.Pid != 0 {
		if pid != 0 && pid != f.Pid || pid == 0 && tid != f.Pid {
			return false
		}
	}
	return f.Comm == "" || string(comm) == f.Comm
}

// FaultLog is a fault log read into memory, sorted by time.
type FaultLog struct {
	Faults []Fault
	Format string // "ftrace", "trace-cmd report", "perf.data"
	// Seen counts fault events before filtering; Filtered those dropped by
	// the filter; Lost the events the tracer reported lost.
	Seen, Filtered, Lost uint64
	Warnings             []string
}

// maxFaults bounds the faults held in memory: at most about 510 bytes each
// with the matcher's state and the Go runtime's slack, so 5.1 GB at the
// limit (a program that touched 40 GB of fresh pages). An access log adds
// nothing: it is streamed.
const maxFaults = 10_000_000

// The kinds of fault log a fault log reader refuses.
var (
	// ErrTooManyFaults: the log holds more than maxFaults faults of the
	// programs selected.
	ErrTooManyFaults = fmt.Errorf("more than %d faults", maxFaults)
	// ErrCounterClock: an ftrace timestamp without a decimal point, from
	// a trace_clock that counts cycles or events, not time.
	ErrCounterClock = errors.New("timestamp without a decimal point (trace_clock counter or x86-tsc?)")
	// ErrNoFaultAddress: a perf.data whose fault samples carry no data
	// address.
	ErrNoFaultAddress = errors.New("no data address")
	// ErrNoFaultSamples: a perf.data without page-fault samples.
	ErrNoFaultSamples = errors.New("the recording has no page-fault samples")
)

const pageFaultEvent = "page_fault_user:"

// ReadFtrace reads exceptions:page_fault_user events from ftrace text:
// /sys/kernel/tracing/trace or trace_pipe, or the output of trace-cmd
// report. Other events and header lines are skipped.
//
//	ls-39090 [003] d.... 13747.755595: page_fault_user: address=0x7fb30b788000 ip=0x7fb31f3fabf3 error_code=0x6
//	ls-39090 (39090) [003] d.... 13747.755595: page_fault_user: ...        (options/record-tgid)
//	ls-39090 [003] 13747.755595: page_fault_user:      address=0x... ip=0x... error_code=0x6   (trace-cmd report)
func ReadFtrace(r io.Reader, filter FaultFilter) (*FaultLog, error) {
	log := &FaultLog{Format: "ftrace"}
	br := bufio.NewReaderSize(r, 1<<16)
	var lineNo, off int64
	for {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return nil, &FormatError{"fault log", lineNo + 1, off, "line longer than 64 KiB: not ftrace text", nil}
		}
		if len(b) == 0 {
			if err != nil && err != io.EOF {
				return nil, fmt.Errorf("fault log: %w", err)
			}
			break
		}
		lineNo++
		lineOff := off
		off += int64(len(b))
		last := err != nil
		b = bytes.TrimRight(b, "\r\n")
		t := trimSpace(b)
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		if bytes.HasPrefix(t, []byte("version = ")) || bytes.HasPrefix(t, []byte("cpus=")) {
			log.Format = "trace-cmd report"
			continue
		}
		if n, ok := lostLine(t); ok {
			log.Lost += n
			continue
		}
		ev := bytes.Index(t, []byte(" "+pageFaultEvent))
		if ev < 0 {
			continue
		}
		f, comm, msg := parseFtraceFault(t, ev)
		if msg != "" {
			if last {
				log.Warnings = append(log.Warnings, fmt.Sprintf("fault log: last line %d is cut short; skipped", lineNo))
				break
			}
			fe := &FormatError{"fault log", lineNo, lineOff, msg + fmt.Sprintf(" in %q", b), nil}
			if msg == ErrCounterClock.Error() {
				fe.Err = ErrCounterClock
			}
			return nil, fe
		}
		log.Seen++
		if !filter.keep(f.Pid, f.Tid, comm) {
			log.Filtered++
			continue
		}
		if len(log.Faults) >= maxFaults {
			return nil, &FormatError{"fault log", lineNo, lineOff, ErrTooManyFaults.Error(), ErrTooManyFaults}
		}
		f.Where = lineNo
		log.Faults = append(log.Faults, f)
	}
	if log.Lost > 0 {
		log.Warnings = append(log.Warnings, fmt.Sprintf("fault log: the tracer lost %d events (its buffer was full): those faults are missing; raise buffer_size_kb", log.Lost))
	}
	log.sort()
	return log, nil
}

// lostLine parses the tracer's loss line, "CPU:1 [LOST 123 EVENTS]"
// (trace, trace_pipe, trace-cmd), and nothing else: a task may be named
// "[LOST 7]x".
func lostLine(t []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(t, []byte("CPU:"))
	if !ok {
		return 0, false
	}
	cpu, rest := nextField(rest)
	if _, ok := parseDec(cpu); !ok {
		return 0, false
	}
	rest, ok = bytes.CutPrefix(trimSpace(rest), []byte("[LOST "))
	if !ok {
		return 0, false
	}
	n, _ := parseDec(firstField(rest))
	return n, true
}

func firstField(b []byte) []byte {
	tok, _ := nextField(b)
	return tok
}

// parseFtraceFault parses a page_fault_user line; ev is the index of
// " page_fault_user:" in t.
func parseFtraceFault(t []byte, ev int) (f Fault, comm []byte, msg string) {
	head := t[:ev]
	// The timestamp is the last field before the event name.
	sp := bytes.LastIndexAny(head, " \t")
	ts := bytes.TrimSuffix(head[sp+1:], []byte(":"))
	if bytes.IndexByte(ts, '.') < 0 {
		return f, nil, ErrCounterClock.Error()
	}
	tm, ok := parseSeconds(ts)
	if !ok {
		return f, nil, "bad timestamp (want SECONDS.FRACTION, below 2^63 ns)"
	}
	f.Time = tm
	// The task is everything before the "[CPU]" field: the last " [N]"
	// (a task name may hold one too, as in "w[0]"; the fields after the
	// CPU, flags and timestamp, never do).
	cpu := -1
	for i := len(head) - 3; i >= 0; i-- {
		if head[i] == '[' && (i == 0 || head[i-1] == ' ' || head[i-1] == '\t') {
			if j := bytes.IndexByte(head[i:], ']'); j > 1 {
				if _, ok := parseDec(head[i+1 : i+j]); ok {
					cpu = i
					break
				}
			}
		}
	}
	if cpu < 0 {
		return f, nil, "no [CPU] field"
	}
	task := trimSpace(head[:cpu])
	// trace-cmd report names the instance first: "NAME:   comm-tid [CPU]".
	if tok, rest := nextField(task); bytes.HasSuffix(tok, []byte(":")) && len(trimSpace(rest)) > 0 {
		task = trimSpace(rest)
	}
	if o := bytes.LastIndexByte(task, '('); o >= 0 && bytes.HasSuffix(task, []byte(")")) {
		// options/record-tgid: "comm-tid (  tgid)"; "(-------)" when unknown.
		if tg, ok := parseDec(trimSpace(task[o+1 : len(task)-1])); ok {
			f.Pid = uint32(tg)
		}
		task = trimSpace(task[:o])
	}
	dash := bytes.LastIndexByte(task, '-')
	if dash < 0 {
		return f, nil, "task has no -PID"
	}
	tid, ok := parseDec(task[dash+1:])
	if !ok || tid > 1<<32-1 {
		return f, nil, "bad task pid"
	}
	f.Tid, comm = uint32(tid), task[:dash]
	var haveAddr, haveIP bool
	rest := t[ev+len(pageFaultEvent)+1:]
	for {
		var tok []byte
		tok, rest = nextField(rest)
		if len(tok) == 0 {
			break
		}
		k, v, ok := bytes.Cut(tok, []byte("="))
		if !ok {
			continue
		}
		n, ok := parseHex(v)
		switch string(k) {
		case "address":
			f.Addr, haveAddr = n, ok
		case "ip":
			f.IP, haveIP = n, ok
		case "error_code":
			if ok {
				f.Code, f.HasCode = n, true
				f.Access = attribute.AccessFromX86ErrorCode(n)
			}
		}
	}
	if !haveAddr || !haveIP {
		return f, nil, "page_fault_user without address= and ip= in hex"
	}
	return f, comm, ""
}

func (l *FaultLog) sort() {
	sort.SliceStable(l.Faults, func(i, j int) bool { return l.Faults[i].Time < l.Faults[j].Time })
}

// Observer sees every perf.data record ReadPerf passes by, in time order
// (a symbolize.Session, to learn the processes' mappings).
type Observer interface {
	Observe(rec perfdata.Record)
}

// ReadPerf reads the page faults of a perf.data recording: page-faults
// samples recorded with -d (the data address), or exceptions:page_fault_user
// tracepoint samples. obs, when not nil, sees every other record.
func ReadPerf(r *perfdata.Reader, filter FaultFilter, obs Observer) (*FaultLog, error) {
	log := &FaultLog{Format: "perf.data"}
	type evInfo struct {
		fault               bool
		address, ip, code   *perfdata.TraceField
		tracepoint, hasAddr bool
	}
	infos := map[*perfdata.Event]*evInfo{}
	info := func(ev *perfdata.Event) *evInfo {
		if in, ok := infos[ev]; ok {
			return in
		}
		in := &evInfo{}
		switch {
		case ev == nil:
		case ev.Attr.Type == perfdata.TypeSoftware && perfdata.SoftwareEvent(ev.Attr.Config).IsPageFault():
			in.fault = true
			in.hasAddr = ev.Attr.SampleType&perfdata.SampleAddr != 0
		case ev.Format != nil && ev.Format.System == "exceptions" && ev.Format.Name == "page_fault_user":
			in.fault, in.tracepoint = true, true
			in.address, in.ip, in.code = ev.Format.Field("address"), ev.Format.Field("ip"), ev.Format.Field("error_code")
			in.hasAddr = in.address != nil
		}
		infos[ev] = in
		return in
	}
	noAddr := map[string]bool{}
	for r.Next() {
		smp, ok := r.Record().(*perfdata.Sample)
		if !ok {
			if obs != nil {
				obs.Observe(r.Record())
			}
			continue
		}
		in := info(smp.Event)
		if !in.fault {
			continue
		}
		if !in.hasAddr {
			noAddr[smp.Event.Name] = true
			continue
		}
		log.Seen++
		f := Fault{Time: int64(smp.Time), Pid: smp.Pid, Tid: smp.Tid, Addr: smp.Addr, IP: smp.IP, Where: smp.Offset}
		if in.tracepoint {
			f.Addr, _ = in.address.Uint64(smp.Raw)
			if v, ok := in.ip.Uint64(smp.Raw); ok {
				f.IP = v
			}
			if v, ok := in.code.Uint64(smp.Raw); ok {
				f.Code, f.HasCode = v, true
				f.Access = attribute.AccessFromX86ErrorCode(v)
			}
		}
		var comm []byte
		if filter.Comm != "" {
			if c, ok := obs.(interface{ Comm(uint32) string }); ok {
				comm = []byte(c.Comm(smp.Pid))
			}
		}
		if !filter.keep(f.Pid, f.Tid, comm) {
			log.Filtered++
			continue
		}
		if len(log.Faults) >= maxFaults {
			return nil, fmt.Errorf("fault log: %w", ErrTooManyFaults)
		}
		log.Faults = append(log.Faults, f)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("fault log: %w", err)
	}
	for _, w := range r.Warnings() {
		log.Warnings = append(log.Warnings, "fault log: "+w.Error())
	}
	for _, ev := range r.Events() {
		if in := infos[ev]; in != nil && in.fault {
			log.Lost += ev.Lost
		}
	}
	for name := range noAddr {
		log.Warnings = append(log.Warnings, fmt.Sprintf("fault log: %s samples carry no data address (record with perf record -d); skipped", name))
	}
	if log.Seen == 0 && len(noAddr) > 0 {
		var names []string
		for name := range noAddr {
			names = append(names, name)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("fault log: the recording's fault samples (%s) carry %w", strings.Join(names, ", "), ErrNoFaultAddress)
	}
	if log.Seen == 0 {
		return nil, fmt.Errorf("fault log: %w", ErrNoFaultSamples)
	}
	if log.Lost > 0 {
		log.Warnings = append(log.Warnings, fmt.Sprintf("fault log: perf lost %d fault samples: those faults are missing", log.Lost))
	}
	log.sort()
	return log, nil
}
