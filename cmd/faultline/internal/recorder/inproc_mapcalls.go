package recorder

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/faultline/faultline/cmd/faultline/internal/recorder/shim"
	"github.com/faultline/faultline/perfdata"
	"github.com/faultline/faultline/perfdata/schema"
	"golang.org/x/sys/unix"
)

// The memory-map calls in-process. The shim writes each call the program
// makes through the C library's wrappers (mmap, munmap, mremap, madvise,
// brk, ...) as one record at its return (shim.KindSys); the recorder writes
// it as the samples the kernel's syscall tracepoints give the uprobe
// method: schema.SyscallEvents, group schema.SyscallSystem, the same
// fields at the same offsets (common fields, __syscall_nr, the arguments;
// ret), sys_enter_mmap with the stack at the wrapper's entry. analyze then
// reads both methods alike, and no tracefs is needed.

// sysIDBase numbers the in-process syscall events (tracepoint ids), apart
// from the other in-process events (shimIDBase up).
const sysIDBase = shimIDBase + 0x80

// sysCall describes one memory-map call's events: its system call number
// and its arguments as the kernel's format names them (the
// SYSCALL_DEFINE's parameters: mm/mmap.c, mm/mremap.c, mm/madvise.c,
// arch/x86/kernel/sys_x86_64.c).
type sysCall struct {
	nr   uint32
	args []string
}

var sysCalls = [shim.NumSys]sysCall{
	shim.SysMmap:    {unix.SYS_MMAP, []string{"addr", "len", "prot", "flags", "fd", "off"}},
	shim.SysMunmap:  {unix.SYS_MUNMAP, []string{"addr", "len"}},
	shim.SysMremap:  {unix.SYS_MREMAP, []string{"addr", "old_len", "new_len", "flags", "new_addr"}},
	shim.SysMadvise: {unix.SYS_MADVISE, []string{"start", "len_in", "behavior"}},
	shim.SysBrk:     {unix.SYS_BRK, []string{"brk"}},
}

// inprocSys holds the in-process syscall events by call: enter always,
// exit where schema.SyscallEvents lists it (nil otherwise).
type inprocSys struct {
	enter, exit [shim.NumSys]*spec
}

// mapCallEvents adds the in-process syscall events, in
// schema.SyscallEvents' order; sys_enter_mmap carries the stack when
// stacks are taken.
// (Each name of schema.SyscallEvents is a shim.Sys: the test says so.)
func (ip *inproc) mapCallEvents(l *specList) {
	s := ip.s
	for i, name := range schema.SyscallEvents {
		call, exit := strings.CutPrefix(name, "sys_exit_")
		if !exit {
			call = strings.TrimPrefix(name, "sys_enter_")
		}
		c := sysByName(call)
		if c >= shim.NumSys {
			continue
		}
		id := uint64(sysIDBase + i)
		a := perfdata.Attr{Type: perfdata.TypeTracepoint, Config: id, SamplePeriod: 1,
			SampleType: shimSampleType, Flags: l.flags | perfdata.AttrUseClockID, ClockID: unix.CLOCK_MONOTONIC}
		stack := c == shim.SysMmap && !exit && s.cfg.StackSize > 0
		if stack {
			a.SampleType |= perfdata.SampleCallchain | perfdata.SampleRegsUser | perfdata.SampleStackUser
			a.Flags |= perfdata.AttrExcludeCallchainUser
			a.SampleRegsUser = userRegsMask
			a.SampleStackUser = s.cfg.StackSize
		}
		sp := &spec{name: schema.SyscallSystem + ":" + name, kind: kindRange, stack: stack, synthetic: true, attr: a}
		sp.format = sysFormat(name, id, sysCalls[c], exit)
		l.add(sp)
		if exit {
			ip.sys.exit[c] = sp
		} else {
			ip.sys.enter[c] = sp
		}
	}
}

func sysByName(name string) shim.Sys {
	for c := shim.Sys(0); c < shim.NumSys; c++ {
		if c.String() == name {
			return c
		}
	}
	return shim.NumSys
}

// sysFormat writes a syscall tracepoint's format as the kernel does
// (kernel/trace/trace_syscalls.c): the common fields, __syscall_nr, then
// the arguments as unsigned longs, or ret as a long.
func sysFormat(name string, id uint64, c sysCall, exit bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nID: %d\nformat:\n", name, id)
	b.WriteString(schema.CommonFieldsFormat +
		"\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n")
	if exit {
		b.WriteString("\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n\nprint fmt: \"0x%lx\", REC->ret\n")
		return []byte(b.String())
	}
	var pf, args []string
	for i, a := range c.args {
		fmt.Fprintf(&b, "\tfield:unsigned long %s;\toffset:%d;\tsize:8;\tsigned:0;\n", a, 16+8*i)
		pf = append(pf, a+": 0x%08lx")
		args = append(args, "((unsigned long)(REC->"+a+"))")
	}
	fmt.Fprintf(&b, "\nprint fmt: \"%s\", %s\n", strings.Join(pf, ", "), strings.Join(args, ", "))
	return []byte(b.String())
}

// writeSys writes a memory-map call (shim.KindSys) as its sys_enter
// sample and, where analysis reads the result, its sys_exit sample, both
// at the call's return. A munmap or madvise that failed changed nothing
// and is not written.
func (ip *inproc) writeSys(g owner, rec *shim.Record) (int, error) {
	s := ip.s
	c := shim.Sys(rec.Func)
	ret := rec.SysRet()
	failed := ret < 0 && ret > -4096
	enter, exit := ip.sys.enter[c], ip.sys.exit[c]
	if enter == nil || failed && exit == nil {
		return 0, nil
	}
	ip.seen(rec.Time, rec.Time)
	ne := binary.NativeEndian
	var n int
	if enter.stack {
		b := ip.sampleHead(ip.sbuf2[:0], enter, g, rec.Time)
		b = ne.AppendUint64(b, 0) // CALLCHAIN: no kernel part, user part excluded
		b = ip.appendSysEnter(b, enter, g, c, rec)
		regs, stack, ok := rec.SysStack()
		if ok {
			b = appendRegs(b, regs)
			b = appendStackUser(b, stack)
		} else {
			b = ne.AppendUint64(b, 0) // REGS_USER: PERF_SAMPLE_REGS_ABI_NONE
			b = ne.AppendUint64(b, 0) // STACK_USER: none
		}
		*enter.count++
		if err := s.w.WriteRecordParts(uint32(perfdata.RecordSample), perfdata.MiscUser, b); err != nil {
			return 0, err
		}
		n += len(b)
		ip.sbuf2 = b[:0]
	} else {
		b := ip.sampleHead(ip.recordBuffer(), enter, g, rec.Time)
		b = ip.appendSysEnter(b, enter, g, c, rec)
		*enter.count++
		if err := s.w.CommitRecord(uint32(perfdata.RecordSample), perfdata.MiscUser, b); err != nil {
			return 0, err
		}
		n += len(b) - 8
	}
	if exit == nil {
		return n, nil
	}
	b, rawAt := ip.startRaw(ip.recordBuffer(), exit, g, rec.Time)
	b = ne.AppendUint32(b, sysCalls[c].nr)
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint64(b, uint64(ret))
	b = finishRaw(b, rawAt)
	*exit.count++
	if err := s.w.CommitRecord(uint32(perfdata.RecordSample), perfdata.MiscUser, b); err != nil {
		return n, err
	}
	return n + len(b) - 8, nil
}

// appendSysEnter appends a sys_enter sample's RAW part: the common
// fields, __syscall_nr (and the padding before the first argument), the
// arguments.
func (ip *inproc) appendSysEnter(b []byte, sp *spec, g owner, c shim.Sys, rec *shim.Record) []byte {
	ne := binary.NativeEndian
	rawAt := len(b)
	b = ne.AppendUint32(b, 0)
	b = appendCommon(b, sp, g.tid)
	b = ne.AppendUint32(b, sysCalls[c].nr)
	b = ne.AppendUint32(b, 0)
	for i := range sysCalls[c].args {
		var v uint64
		if i < 5 {
			v = rec.SysArg(i)
		}
		b = ne.AppendUint64(b, v) // mmap's off (the sixth) is not kept: 0
	}
	return finishRaw(b, rawAt)
}
