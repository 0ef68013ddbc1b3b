// Package attribute joins page faults to the allocations whose bytes they
// touched.
//
// A Tracker takes allocator entries and returns (malloc, calloc, realloc,
// the memalign family), frees, anonymous mmaps, forks, execs, exits and page
// faults, in time order, and keeps every process's live allocations in an
// interval index. Each fault is credited to the live allocation containing
// its address in its process; a fault taken on a thread while its own
// allocator call is in flight (glibc writing an mmap'd chunk's header) is
// resolved at the return against the new chunk [ptr-16, ptr+size). Faults
// no allocation explains are classed by what they touched ([stack], [heap],
// [anon], a file, [unknown]). Allocations are flagged fast (small request),
// mmap (served by their own mmap: the chunk header's IS_MMAPPED bit, else an
// anonymous mmap at the chunk's start, else the size threshold) and zero
// (calloc, or memset first). Results go to a Sink in stream order.
//
// The glibc facts this relies on come from malloc/malloc.c of glibc 2.36:
// chunk layout (a 16-byte header before the pointer on x86-64), the mmap
// threshold (128 KiB, raised by frees of larger mmap'd chunks), fastbin
// sizes.
//
// Sub-packages: analyze runs the whole pipeline over a perf.data recording;
// report builds the pprof profile; diff compares two profiles for CI;
// correlate joins a memory-access log (Pin's pinatrace format) with a
// page-fault log to name the access behind each fault.
package attribute
