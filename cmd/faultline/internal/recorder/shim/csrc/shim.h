/*
 * shim.h — faultline's in-process allocator recorder: what its parts share.
 *
 * `faultline record` preloads this object (LD_PRELOAD) into the program it
 * runs. It interposes the C allocator's entry points, calls the allocator
 * the program would have called (the next definition, RTLD_NEXT), and
 * writes each call — entry with its arguments and the top of the stack,
 * return with the pointer, free; or a call from the program's own
 * executable without a stack whole, at its return — as a fixed-layout
 * record into a ring of its thread in shared memory (abi.h). The recorder
 * drains the rings into perf.data samples shaped like its uprobe events,
 * so analysis is the same for both methods. No trap into the kernel per
 * call: a call costs two clock reads (the TSC where it may: "The clock"
 * below) and a few stores.
 *
 * Rules this file keeps:
 *  - Nothing here may allocate through the allocator while recording:
 *    the thread state is initial-exec TLS (no __tls_get_addr), and calls
 *    made by the shim's own symbol lookups (dlsym) pass through unrecorded
 *    and are counted (fl_ring.nested). A signal handler's calls that
 *    interrupt the shim mid-record cannot be written either: they are
 *    counted too (fl_ring.interrupted), and reported as lost.
 *  - A full ring blocks its thread (nothing is dropped) for at most
 *    fl_ctrl.wait_ns; after that the program runs on unrecorded and the
 *    control block says from when (fl_ctrl.abandoned_time).
 *  - The shim's own code never appears in a recorded stack: an entry's
 *    registers and stack are those at the interposed function's entry,
 *    and its ip is the next definition's address, so unwinding starts in
 *    the real allocator exactly as at a uprobe on it.
 *  - The entry stubs are assembly of one architecture, in a file of
 *    their own (stubs-x86_64.S): another architecture is another such
 *    file and its `struct saved`.
 */

/*
 * The parts, one file each:
 *   boot.c            the arena that serves calls before the allocator is found
 *   clock.c, clock.h  the clock records are stamped with
 *   resolve.c         finding the allocator the program would have called
 *   ring.c, ring.h    the ring protocol: attaching the region, claiming a
 *                     ring, making room, begin and commit
 *   stack.c, stack.h  the stack a sampled call carries, and where each
 *                     thread's stack lies
 *   writer.c          the records a call is written as
 *   alloc.c           the C allocator's entry points
 *   new.c             operator new, where libstdc++'s is the next (the
 *                     object for glibc and others)
 *   family.c          an allocator family's own entry points, operator
 *                     new and delete among them (the object for that
 *                     family: build.sh)
 *   mapcalls.c        the memory-map calls (mmap, munmap, madvise, brk, ...)
 *   stubs-x86_64.S    the entry stubs and the launcher's entry (assembly)
 *   launch.c          the launcher
 *   attach.c          recording a running program: its GOT entries
 *                     rewritten to the entry points, and put back
 */
#ifndef FAULTLINE_SHIM_H
#define FAULTLINE_SHIM_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Everything is hidden (build.sh: -fvisibility=hidden; and the
 * declarations below, so the parts reach one another's data directly, not
 * through the GOT) but the entry points the shim interposes, marked
 * EXPORT. */
#pragma GCC visibility push(hidden)
#define HIDDEN __attribute__((visibility("hidden")))
#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* The allocator the program would have called (resolve.c). */
struct real {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	void (*free)(void *);
	void *(*memalign)(size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	/* libstdc++'s operator new and new[], and what they call. */
	void *(*op_new)(size_t);
	void *(*op_new_array)(size_t);
	void (*(*get_new_handler)(void))(void);    /* std::get_new_handler */
	__attribute__((noreturn)) void (*throw_bad_alloc)(void); /* std::__throw_bad_alloc */
	/* The memory-map calls' wrappers (mapcalls.c). */
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
	void *(*mremap)(void *, size_t, size_t, int, ...);
	int (*madvise)(void *, size_t, int);
	int (*posix_madvise)(void *, size_t, int);
	int (*brk)(void *);
	void *(*sbrk)(intptr_t);
};
extern struct real real;

/* Where the allocator is looked up: the next definition (RTLD_NEXT) in a
 * program that preloads the shim; the program's global scope
 * (RTLD_DEFAULT) once attach.c loaded it into a running program. */
extern void *next_scope;

/* The next operator new is libstdc++'s, which allocates with malloc: the
 * shim's own (new.c) may stand in for it. */
extern int std_new;
extern int glibc; /* the next malloc is glibc's: read chunk headers */

void resolve(void);
void resolve_new(void);    /* new.c's next operator new (not in a family's object) */
void resolve_family(void); /* family.c's next definitions (a family's object) */
void find_own_code(void);

/* The program's own code: the executable segments of the program itself
 * (the first object dl_iterate_phdr reports, the one without a name). An
 * allocating call returning there was made by the program, whose return
 * address alone is the site: its entry carries that word only
 * (FL_F_SHORT), which is what the recorder writes for it anyway. */
#define MAX_OWN 4
struct code_range {
	uint64_t lo, hi;
};
extern struct code_range own[MAX_OWN];
extern int nown;

static inline int own_code(uint64_t pc)
{
	for (int i = 0; i < nown; i++)
		if (pc - own[i].lo < own[i].hi - own[i].lo)
			return 1;
	return 0;
}

/* Until `real` is resolved (dlsym may allocate), calls are served from
 * this arena (boot.c) and never freed. */
#define BOOT_BYTES (16 << 10)
extern char boot[BOOT_BYTES];

static inline int is_boot(const void *p)
{
	return (const char *)p >= boot && (const char *)p < boot + BOOT_BYTES;
}

void *boot_alloc(size_t n, size_t align);

/* The shim's own memory-map calls go straight to the kernel: the C
 * library's wrappers are the shim's (mapcalls.c), which record. */
static inline void *raw_mmap(void *a, size_t n, int prot, int flags, int fd)
{
	return (void *)syscall(SYS_mmap, a, n, prot, flags, fd, 0);
}

static inline int raw_munmap(void *a, size_t n)
{
	return (int)syscall(SYS_munmap, a, n);
}

static inline int raw_madvise(void *a, size_t n, int advice)
{
	return (int)syscall(SYS_madvise, a, n, advice);
}

/* Per-thread state. */
struct tstate {
	struct fl_ring *ring;
	uint32_t gen;   /* `gen` when ring was claimed */
	uint32_t depth; /* > 0: the shim is running on this thread */
	uint32_t own;   /* > 0: it resolves symbols (init, operator new), whose
			 * calls to the allocator are its own, not the program's */
	uint32_t off;   /* this thread records nothing (no ring) */
	uint32_t count; /* smaller calls since the last sampled one */
	uintptr_t stack_lo, stack_hi; /* the mapping holding the stack */
	uintptr_t copy_hi; /* stack copies end here: all unwinding reads */
	uint64_t cal_m, cal_c; /* the clock's last pair (CLOCK_MONOTONIC, TSC) */
	uint64_t base_m, base_c; /* the pair the rate is next measured from */
	uint64_t last;         /* the last stamp */
	uint64_t pop_end; /* ring data populated below this head; ~0: all */
	uint32_t calls;   /* FL_CALL calls between entry and return: the ring
			   * stays busy until the last of them commits */
	uint64_t freeing; /* the pointer a recorded free is passing on to the
			   * allocator (family.c) */
};
extern __thread struct tstate ts __attribute__((tls_model("initial-exec")));

extern struct fl_ctrl *ctrl; /* NULL: not recording */
extern int state;            /* 0 new, 1 initializing, 2 ready */

/* init runs once, at the first allocator call of the process (ring.c). */
void init(void);

/* Saved by the entry stubs (stubs-x86_64.S): rbx, rbp, r12..r15 at the
 * function's entry; the entry stack pointer is saved + STUB_FRAME. */
#define STUB_FRAME 72
struct saved {
	uint64_t rbx, rbp, r12, r13, r14, r15;
};

static inline uint64_t entry_sp(const struct saved *s)
{
	return (uint64_t)s + STUB_FRAME;
}

/* malloc as the shim records it (alloc.c): operator new calls it. */
void *fl_malloc(size_t n, const struct saved *s);

/* The launcher's entry point (stubs-x86_64.S). */
extern char fl_launch_start[];

#endif
