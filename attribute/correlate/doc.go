// Package correlate joins a memory-access log with a page-fault log: for
// each fault, the logged access that caused it.
//
// Access logs are Intel Pin's pinatrace layout and its common
// modifications (a leading CLOCK_MONOTONIC timestamp, a thread id):
//
//	0x72f1e9532543: W 0x7ffcebf1a788
//	13746.948842: 0x72f1e9532543: W 0x7ffcebf1a788
//	13746.948842: 39090: 0x72f1e9532543: W 0x7ffcebf1a788
//
// Fault logs are ftrace text of exceptions:page_fault_user (the trace and
// trace_pipe files, or trace-cmd report) or the fault samples of a
// perf.data (page-faults with -d, or the tracepoint).
//
// Faults are few (one per page and mapping) and are held in memory, indexed
// by page; the access log, which can be many gigabytes, is streamed and
// never held: an access to a page without faults costs one map lookup and
// is forgotten, an access to a faulted page updates at most a few
// candidates of that page's faults. Memory is therefore proportional to the
// number of faults, not of accesses.
//
// Matching a fault F on page P (same thread where both logs name threads;
// a write fault needs a write access, a read fault a read):
//
//  1. Order pass (no clocks): the first access to P not yet explained by
//     an earlier fault on P at F's ip — at F's exact byte when there is
//     one (the kernel reports the byte that faulted) — is an exact match;
//     the clock offset between the logs is the median of fault time −
//     access time over the exact matches.
//  2. Time pass, with that offset (or the one given): among the accesses
//     to P after the previous fault on P, the one nearest F — the last
//     before it, or the first after it within the window (clock jitter) —
//     at F's ip and byte (up to 100 windows before F: a thread preempted
//     between logging and making the access), else at F's ip within the
//     window, else at any ip within the window.
//
// Access logs without timestamps, and logs that cannot be read twice (a
// pipe) without a given offset, are matched by the order pass alone. Under
// Pin the faulting instruction runs from Pin's code cache, so exact ip
// matches can be rare: the offset then comes from first touches of pages
// (the order pass's page matches) and the result says so.
package correlate
