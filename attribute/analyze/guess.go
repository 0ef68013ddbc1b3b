package analyze

import (
	"encoding/binary"
	"fmt"

	"github.com/faultline/faultline/attribute"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/symbolize/unwind"
)

// guessRole infers the role of a uprobe event whose format the recording
// lacks. perf writes TRACING_DATA (the formats) and EVENT_DESC (the names)
// after the data, so a recording cut short (perf killed, disk full) has
// neither; the attrs at the front still say which samples belong together.
//
// A uprobe's raw data is the 8-byte common header, then for an entry probe
// __probe_ip and the fetch args, for a return probe __probe_func,
// __probe_ret_ip and the args (kernel/trace/trace_uprobe.c). At an entry
// probe the user IP is the probed address, so raw[8:16] equals it; at a
// return probe the user IP is the return address, so raw[16:24] does. The
// function is named from the binary at the probed address, and the args are
// taken in the order faultline record and the README's perf probe lines
// write them (malloc size; calloc nmemb, size; realloc ptr, size; free ptr;
// returns ptr, then hdr). Decided on the event's first sample, for good.
func (ru *run) guessRole(in *eventInfo, smp *perfdata.Sample) {
	in.guess = false
	raw := smp.Raw
	arch := ru.sess.Arch()
	regs := unwind.RegsFromPerf(arch, smp.RegsMask, smp.Regs)
	ip, ok := regs.PC(arch)
	if !ok || len(raw) < 24 {
		ru.guessWarn(in, "its samples carry no user registers or too little raw data")
		return
	}
	le := binary.LittleEndian
	field := func(name string, off int) *perfdata.TraceField {
		if off+8 > len(raw) {
			return nil
		}
		return &perfdata.TraceField{Name: name, Offset: off, Size: 8}
	}
	switch {
	case le.Uint64(raw[8:]) == ip:
		fn := ru.funcAt(smp.Pid, ip)
		if kind, ok := allocNames[fn]; ok {
			in.role, in.kind = RoleAllocEntry, kind
			switch fn {
			case "calloc", "__libc_calloc", "__calloc":
				in.nmemb, in.size = field("nmemb", 16), field("size", 24)
			case "realloc", "__libc_realloc", "__realloc", "memalign", "__libc_memalign", "aligned_alloc":
				in.oldPtr, in.size = field("ptr", 16), field("size", 24)
				if in.kind == attribute.KindMemalign {
					in.oldPtr = nil
				}
			default:
				in.size = field("size", 16)
			}
			if in.size == nil {
				in.role = RoleNone
			}
		} else if freeNames[fn] {
			in.role, in.ptr = RoleFree, field("ptr", 16)
		}
		ru.guessNote(in, fn, "entry")
	case len(raw) >= 32 && le.Uint64(raw[16:]) == ip:
		fn := ru.funcAt(smp.Pid, le.Uint64(raw[8:]))
		if kind, ok := allocNames[fn]; ok {
			in.role, in.kind = RoleAllocReturn, kind
			in.retIP, in.ptr, in.hdr = field("__probe_ret_ip", 16), field("ptr", 24), field("hdr", 32)
		}
		ru.guessNote(in, fn, "return")
	default:
		ru.guessWarn(in, "its raw data does not look like a uprobe's")
	}
}

func (ru *run) guessNote(in *eventInfo, fn, what string) {
	if in.role == RoleNone {
		ru.guessWarn(in, fmt.Sprintf("it probes %q (%s), not an allocator", fn, what))
		return
	}
	ru.warnings = append(ru.warnings, fmt.Errorf("event %s has no format in the recording (cut before its TRACING_DATA?): taken as the %s probe of %s from its samples", in.ev.Name, what, fn))
}

func (ru *run) guessWarn(in *eventInfo, why string) {
	ru.warnings = append(ru.warnings, fmt.Errorf("event %s has no format in the recording and is ignored: %s", in.ev.Name, why))
}

// funcAt names the allocator function at a code address of pid: the ELF
// symbol or DWARF name, reduced to a known allocator name when it is one.
func (ru *run) funcAt(pid uint32, addr uint64) string {
	m := ru.sess.Region(pid, addr)
	b := ru.sess.Binary(m)
	if b == nil {
		return ""
	}
	vaddr, ok := b.MappedVaddr(addr, m.Start, m.Pgoff)
	if !ok {
		return ""
	}
	frames := b.Symbolize(vaddr, nil)
	if len(frames) == 0 {
		return ""
	}
	f := frames[len(frames)-1]
	for _, name := range []string{f.Symbol, f.Func} {
		if fn := baseFunc(name); fn != "" {
			if _, ok := allocNames[fn]; ok || freeNames[fn] {
				return fn
			}
		}
	}
	return f.Symbol
}
