package symbolize

import (
	"strconv"
	"strings"

	"github.com/faultline/faultline/perfdata"
)

// ScriptWriter formats samples the way `perf script -F
// comm,pid,tid,time,event,addr,ip,sym,dso,trace` does with a call graph:
//
//	comm pid/tid time: event: <addr or raw fields>
//	\t<hex address relative to the dso> <symbol> (<dso>)
//	...
//	<blank line>
//
// Inlined frames at an address come first, marked "(inlined)". The text
// reads unchanged in stackcollapse-perf.pl, FlameGraph and speedscope.
type ScriptWriter struct {
	S         *Session
	Inline    bool // print inlined frames (perf's default)
	NameWidth int  // width of the event column: the longest event name
	buf       []byte
}

// Format appends one sample (header and frames) to the writer's buffer and
// returns it; the caller writes it out. The buffer is reused by the next call.
func (w *ScriptWriter) Format(smp *perfdata.Sample, stack StackID) []byte {
	b := w.buf[:0]
	b = append(b, w.S.Comm(smp.Pid)...)
	b = append(b, ' ')
	b = padLeft(b, strconv.AppendUint(nil, uint64(smp.Pid), 10), 5)
	b = append(b, '/')
	n := len(b)
	b = strconv.AppendUint(b, uint64(smp.Tid), 10)
	for len(b)-n < 5 {
		b = append(b, ' ')
	}
	b = append(b, ' ')
	b = appendTime(b, smp.Time)
	b = append(b, ": "...)
	name := ""
	if smp.Event != nil {
		name = smp.Event.Name
	}
	for i := len(name); i < w.NameWidth; i++ {
		b = append(b, ' ')
	}
	b = append(b, name...)
	b = append(b, ": "...)
	b = w.appendPayload(b, smp)
	b = append(b, '\n')
	for _, id := range w.S.Stack(stack) {
		l := w.S.Loc(id)
		// perf (libdw) names and prints a return address by its call
		// instruction, PC-1, as addr2line wants too.
		lines := w.S.Lines(id, false)
		addr := l.relAddr()
		if l.Return {
			addr--
		}
		if w.Inline {
			for _, f := range lines[:len(lines)-1] {
				b = appendFrame(b, addr, f.Func, "inlined")
			}
		}
		last := lines[len(lines)-1]
		sym := last.Symbol
		if sym == "" {
			sym = last.Func
		}
		b = appendFrame(b, addr, sym, l.dso())
	}
	b = append(b, '\n')
	w.buf = b
	return b
}

func appendFrame(b []byte, addr uint64, sym, dso string) []byte {
	b = append(b, '\t')
	b = padLeft(b, strconv.AppendUint(nil, addr, 16), 16)
	b = append(b, ' ')
	b = append(b, sym...)
	b = append(b, " ("...)
	b = append(b, dso...)
	return append(b, ")\n"...)
}

func padLeft(b, s []byte, w int) []byte {
	for i := len(s); i < w; i++ {
		b = append(b, ' ')
	}
	return append(b, s...)
}

// appendTime prints nanoseconds as perf does: "%5lu.%06lu" seconds.microseconds.
func appendTime(b []byte, ns uint64) []byte {
	b = padLeft(b, strconv.AppendUint(nil, ns/1e9, 10), 5)
	b = append(b, '.')
	us := strconv.AppendUint(nil, ns%1e9/1e3, 10)
	for i := len(us); i < 6; i++ {
		b = append(b, '0')
	}
	return append(b, us...)
}

// appendPayload prints a tracepoint's raw fields (probes as perf prints
// them: "(ip) f=v", "(ip <- ret) f=v"), or the sample address.
func (w *ScriptWriter) appendPayload(b []byte, smp *perfdata.Sample) []byte {
	ev := smp.Event
	if ev == nil || ev.Format == nil || len(smp.Raw) == 0 {
		b = padLeft(b, strconv.AppendUint(nil, smp.Addr, 16), 16)
		if m := w.S.Maps.find(smp.Pid, smp.Addr); m != nil {
			b = append(b, " ("...)
			b = append(b, m.File...)
			b = append(b, ')')
		}
		return b
	}
	f := ev.Format
	probe := f.Field("__probe_ip")
	first := true
	if probe != nil {
		ip, _ := probe.Uint64(smp.Raw)
		b = append(b, '(')
		b = strconv.AppendUint(b, ip, 16)
		if ret := f.Field("__probe_ret_ip"); ret != nil {
			rip, _ := ret.Uint64(smp.Raw)
			b = append(b, " <- "...)
			b = strconv.AppendUint(b, rip, 16)
		}
		b = append(b, ')')
		first = false
	}
	for i := range f.Fields {
		fd := &f.Fields[i]
		if fd.Common || fd.Dynamic || fd.ArrayLen > 0 || strings.HasPrefix(fd.Name, "__probe_") {
			continue
		}
		v, ok := fd.Uint64(smp.Raw)
		if !ok {
			continue
		}
		if !first {
			b = append(b, ' ')
		}
		first = false
		b = append(b, fd.Name...)
		b = append(b, '=')
		if probe != nil && (strings.HasPrefix(fd.Type, "u") || strings.HasPrefix(fd.Type, "s")) && !strings.HasPrefix(fd.Type, "unsigned long") {
			// uprobe fetch args typed u64/s32...: perf prints them in decimal
			if fd.Signed {
				b = strconv.AppendInt(b, int64(v), 10)
			} else {
				b = strconv.AppendUint(b, v, 10)
			}
			continue
		}
		b = append(b, "0x"...)
		b = strconv.AppendUint(b, v, 16)
	}
	return b
}
