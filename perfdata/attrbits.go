package perfdata

// More perf_event_attr flag bits (the bitfield word at offset 40), for
// writers of attrs: include/uapi/linux/perf_event.h.
const (
	AttrEnableOnExec         AttrFlags = 1 << 12 // enable_on_exec: switch on at the task's next exec
	AttrTask                 AttrFlags = 1 << 13 // task: FORK and EXIT records
	AttrWatermark            AttrFlags = 1 << 14 // watermark: wake the reader by bytes (wakeup_watermark), not events
	AttrExcludeCallchainUser AttrFlags = 1 << 22 // exclude_callchain_user (perf --call-graph dwarf sets it)
	AttrCommExec             AttrFlags = 1 << 24 // comm_exec: COMM records of an exec say so (MiscCommExec)
	// AttrBuildID is build_id (Linux 5.12+, commit 88a16a130933): MMAP2
	// records carry the mapped file's build ID (MiscMmapBuildID) in place
	// of device and inode. Older kernels refuse the attr (EINVAL).
	AttrBuildID AttrFlags = 1 << 34
)
