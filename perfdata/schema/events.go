package schema

import "strconv"

// System is the tracefs-style system of the events faultline record
// synthesizes rather than reads from tracefs: the in-process method's
// allocator events (faultline:malloc, faultline:malloc__return,
// faultline:malloc__call, …) and RSSEvent.
const System = "faultline"

// The suffixes that end an allocator event's name after its entry point's
// Event: a return probe's (perf probe's spelling, "malloc__return") and a
// whole-call event's, one sample for a call entry and return together
// ("malloc__call", written by the in-process method for a call during
// which its thread took no fault).
const (
	ReturnSuffix = "__return"
	CallSuffix   = "__call"
)

// RSSEvent names faultline record's synthetic event faultline:rss: one
// sample at the end with the recorded program's pid, its peak RSS (hwm:
// wait4's ru_maxrss, file pages included) and its peak anonymous RSS
// (anon_peak: RssAnon read while it ran), in bytes.
const RSSEvent = "rss"

// SyscallSystem is the tracepoint group of the memory-map calls.
const SyscallSystem = "syscalls"

// SyscallEvents are the tracepoints (group SyscallSystem) faultline record
// opens for the memory-map calls, in this order: sys_enter_NAME and
// sys_exit_NAME (include/trace/events/syscalls.h; the fields are the
// syscall's arguments as named in its SYSCALL_DEFINE, and ret). munmap and
// madvise are taken at their entry (they do not fail on a valid range);
// mmap, mremap and brk need their exit's return value.
var SyscallEvents = []string{
	"sys_enter_mmap", "sys_exit_mmap", "sys_enter_munmap", "sys_enter_mremap", "sys_exit_mremap",
	"sys_enter_madvise", "sys_enter_brk", "sys_exit_brk",
}

// The fields an allocator entry event made by faultline record carries
// besides its arguments: the stack pointer, the frame pointer and the top
// words of the stack at the probed function's first instruction, as tracefs
// fetch arguments (TopStackSP=%sp TopStackBP=%bp s0=+0(%sp) s1=+8(%sp) …).
// For a call recorded without a stack they are enough to unwind through
// the allocator's thin wrappers (operator new and its variants) to the
// first caller outside them: the call's exact leaf.
const (
	TopStackSP = "sp"
	TopStackBP = "bp"
	// MaxTopWords bounds the words read: a tracefs probe takes at most
	// 128 arguments (Linux MAX_TRACE_ARGS).
	MaxTopWords = 128
)

// TopStackWord is the field name of the i-th word above the stack pointer.
func TopStackWord(i int) string { return "s" + strconv.Itoa(i) }

// PackedEvent names faultline record's event faultline:packed: one sample
// holds a batch of samples of one thread, each one of faultline's own
// tracepoint-shaped events, delta-encoded (perfdata's Packer writes it,
// its Reader expands it into the samples it holds, which analysis reads
// as if they had been written one by one). Its raw payload after the
// common fields: u32 count (samples in the batch), a __data_loc u8[]
// samples field, then u32 columns. Each sample is a series of unsigned
// LEB128 varints of zigzag-encoded differences: its IDENTIFIER from the
// previous sample's (the first: from the batch's own), its TIME from the
// previous sample's (the first: from the batch's), then each field of its
// event's format after the common fields, in order, from that field's
// value in the previous sample of the same event in the batch (the first:
// from 0). The samples' bytes hold them in columns: first `columns`
// varints, each column's length in bytes, then the columns, one after the
// other: column 0 holds the samples' IDENTIFIER differences in order,
// column 1 their TIME differences, column 2+k their k-th fields'. (A
// format without the columns field, as files written before it have,
// holds the samples one after the other, each its varints in order.)
// Every sample shares the batch's TID; its common fields are its event's
// type and the thread, and its raw payload is padded with zeros as the
// kernel pads it. The events so packed have sample type IDENTIFIER, TID,
// TIME, RAW and fields of 1, 2, 4 or 8 bytes laid out without gaps.
const PackedEvent = "packed"

// StackDeltaEvent names faultline record's event faultline:stackdelta:
// one sample stands for one sample of another event that ends in a copy
// of a thread's stack (REGS_USER, STACK_USER), with the runs of bytes it
// shares with the previous sample of the same thread that a stack-delta
// sample stood for left out (perfdata's StackDeltas writes it, its Reader
// puts the bytes back). Its raw payload after the common fields: u32
// count, a __data_loc u32[] copies field (count triples at, from, n, by
// ascending at) and a __data_loc u8[] sample field. The sample it stands
// for, after its 8-byte header (whose type and misc are the stack-delta
// sample's, whose size is the sample's), is built by taking sample's
// bytes in order and, when the built part is at bytes long, putting in
// the n bytes at offset from of the previous sample (after its header)
// the thread's stack-delta samples stood for, for each copy in turn.
// Writer and reader keep the previous samples of at most 64 threads: a
// sample of another thread makes both forget them all.
const StackDeltaEvent = "stackdelta"

// CommonFieldsFormat is the fields every tracepoint record starts with
// (8 bytes), as a tracefs format file lists them, with the blank line
// that ends them.
const CommonFieldsFormat = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" +
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" +
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" +
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
