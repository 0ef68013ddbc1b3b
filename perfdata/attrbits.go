package perfdata

// More perf_event_attr flag bits (the bitfield word at offset 40), for
// writers of attrs: include/uapi/linux/perf_event.h.
const (
	AttrEnableOnExec         AttrFlags = 1 << 12 // enable_on_exec: switch on at the task's next exec
	AttrTask                 AttrFlags = 1 << 13 // task: FORK and EXIT records
	AttrExcludeCallchainUser AttrFlags = 1 << 22 // exclude_callchain_user (perf --call-graph dwarf sets it)
	AttrCommExec             AttrFlags = 1 << 24 // comm_exec: COMM records of an exec say so (MiscCommExec)
)
