/*
 * abi.h — the shared-memory layout between faultline's allocator shim
 * (the C files here, loaded into the recorded program with LD_PRELOAD)
 * and the recorder (../shim.go mirrors every constant and offset here; its test
 * checks them against this file).
 *
 * The recorder creates one memfd: a control block, then nslots rings. Each
 * thread of the program claims a ring the first time it calls the
 * allocator and is its only producer; the recorder is the only consumer.
 * A ring is a header (FL_RING_HDR bytes) and ring_bytes of data holding
 * records, each 8-byte aligned and never split at the end (a producer
 * that would cross the end writes an FL_PAD record and starts at 0).
 */
#ifndef FAULTLINE_ABI_H
#define FAULTLINE_ABI_H

#include <stdint.h>

#define FL_MAGIC 0x31534c46u /* "FLS1" little-endian */
#define FL_VERSION 5
#define FL_CTRL_BYTES 16384 /* control block */
#define FL_MAX_SLOTS 1024
#define FL_RING_HDR 4096
#define FL_MAX_WORDS 16
#define FL_MAX_STACK 65528

/* Environment variable naming the region: "PID:FD:INODE" — the file is
 * opened as /proc/PID/fd/FD and must have that inode. */
#define FL_ENV "FAULTLINE_SHM"

struct fl_ctrl {
	uint32_t magic, version;
	uint32_t nslots;      /* rings after the control block */
	uint32_t ring_bytes;  /* data bytes per ring, a power of two */
	uint32_t stack_size;  /* stack bytes copied per sampled call, 0: none */
	uint32_t stack_every; /* 1 in stack_every smaller calls is sampled */
	uint64_t stack_min;   /* calls of at least this size are all sampled */
	uint32_t words;       /* top-of-stack words per entry, <= FL_MAX_WORDS */
	uint32_t glibc;       /* 1: the allocator is glibc's (read chunk headers) */
	uint32_t wake;        /* futex word the recorder sleeps on */
	uint32_t sleeping;    /* the recorder is (about to be) asleep on wake */
	uint32_t detached;    /* recorder stopped: producers record no more */
	uint32_t abandoned;   /* a producer gave up waiting for room */
	uint64_t abandoned_time;
	uint64_t wait_ns;        /* the longest a producer waits for room */
	uint64_t unrecorded;     /* calls not recorded: no free ring, or abandoned */
	uint64_t slots_full;     /* threads that found no free ring */
	uint32_t slot_state[FL_MAX_SLOTS]; /* FL_SLOT_* */
	uint32_t tsc;           /* 1: stamp from the TSC (clock.c) */
	uint32_t tsc_jumps;     /* times the TSC disagreed with CLOCK_MONOTONIC */
	uint64_t tsc_jump_time; /* CLOCK_MONOTONIC of the first of them */
	uint32_t map_calls;     /* 1: record the memory-map calls (FL_SYS) */
	uint32_t pad;
};

enum { FL_SLOT_FREE = 0, FL_SLOT_CLAIMED = 1 };

/* fl_ring.busy. FL_BUSY_CALL: a call recorded whole (FL_CALL) is in flight,
 * from its entry's clock read to its record's commit; records committed
 * inside it (a memory-map call the allocator makes, a signal handler's
 * call) leave it so, and a head that moves does not end it. */
enum { FL_BUSY_NO = 0, FL_BUSY_RECORD = 1, FL_BUSY_CALL = 2 };

/* Ring header: the producer's cache line, then the consumer's. */
struct fl_ring {
	uint64_t head;     /* bytes committed by the producer (monotonic) */
	uint32_t busy;     /* FL_BUSY_*: producer between its clock read and
			    * its commit, or inside a call recorded whole */
	uint32_t pid, tid; /* the owner */
	uint32_t waiting;  /* producer is blocked for room */
	uint64_t nested;   /* calls made by the shim's own work (dlsym, ...) */
	uint64_t waits;    /* times the producer waited for room */
	uint64_t clock_reads; /* CLOCK_MONOTONIC read for a stamp (clock.c) */
	uint64_t interrupted; /* the program's calls (a signal handler's) that
			       * came while the shim was recording a call of
			       * this thread: not recorded */
	uint8_t pad0[64 - 56];
	uint64_t tail;     /* bytes consumed by the recorder (monotonic) */
	uint32_t tail_seq; /* futex word: bumped when tail moves */
	uint32_t pad1;
};

/* Record kinds. */
enum { FL_PAD = 0, FL_ENTRY = 1, FL_RETURN = 2, FL_FREE = 3, FL_CALL = 4, FL_SYS = 5 };

/* Entry points (the recorder names events after them). */
enum {
	FL_FN_MALLOC = 0,
	FL_FN_CALLOC,
	FL_FN_REALLOC,
	FL_FN_REALLOCARRAY,
	FL_FN_FREE,
	FL_FN_MEMALIGN,
	FL_FN_ALIGNED_ALLOC,
	FL_FN_POSIX_MEMALIGN,
	FL_FN_VALLOC,
	FL_FN_PVALLOC,
	FL_NFN
};

/* Memory-map calls (FL_SYS's fn), as the system calls they make. */
enum {
	FL_SYS_MMAP = 0,
	FL_SYS_MUNMAP,
	FL_SYS_MREMAP,
	FL_SYS_MADVISE,
	FL_SYS_BRK,
	FL_NSYS
};

/* Record flags. */
enum {
	FL_F_STACK_BIG = 1,   /* stack: the call is at least stack_min */
	FL_F_STACK_SMALL = 2, /* stack: 1 in stack_every of the smaller */
	FL_F_SHORT = 4,       /* one word, not `words`: called from the program */
};

struct fl_rec {
	uint32_t size; /* bytes, a multiple of 8, this header included */
	uint8_t kind, fn;
	uint16_t flags;
	uint64_t time; /* CLOCK_MONOTONIC, ns */
};

/* FL_ENTRY: after fl_rec, the function's address (what a uprobe reports as
 * __probe_ip), its three integer arguments, the stack and frame pointers
 * at its entry, and `words` words from that stack pointer up (word 0 is the
 * return address), or with FL_F_SHORT that word only (the call came from
 * the program's own executable, whose return address is the site). With
 * FL_F_STACK_* (never with FL_F_SHORT): struct fl_regs, a u64 byte count,
 * then that many stack bytes (padded to 8). */
struct fl_entry {
	uint64_t ip;
	uint64_t args[3];
	uint64_t sp, bp;
};

/* Registers at the function's entry, in perf's x86-64 sample_regs_user
 * order for the ones DWARF unwinding uses. */
struct fl_regs {
	uint64_t bx, bp, sp, ip, r12, r13, r14, r15;
};

/* FL_RETURN: the function's address, the pointer returned (posix_memalign:
 * the pointer stored), its chunk header word (glibc) or 0, the caller's
 * return address, and the function's return value as an integer
 * (posix_memalign's status). */
struct fl_return {
	uint64_t ip, ptr, hdr, ret_ip, status;
};

/* FL_CALL: a whole call written once, at its return (fl_rec.time), in
 * place of an entry with FL_F_SHORT and its return: a call from the
 * program's own executable that takes no stack, to an entry point with at
 * most two arguments and no status. The return's fields come first, at
 * fl_return's offsets, then the entry's time, its two arguments and its
 * stack pointer (the return address is ret_ip). The ring stays busy from
 * the entry's clock read to this record's commit. */
struct fl_call {
	uint64_t ip, ptr, hdr, ret_ip;
	uint64_t entry_time;
	uint64_t args[2];
	uint64_t sp;
};

/* FL_SYS: a memory-map call made through the C library's wrapper
 * (mapcalls.c), written once at its return (fl_rec.time): the system
 * call's arguments in its own order (mmap: addr, len, prot, flags, fd;
 * munmap: addr, len; mremap: addr, old_len, new_len, flags, new_addr;
 * madvise: start, len, behavior; brk: the break asked for) and what the
 * system call returned (mmap, mremap: the address, or -errno; brk: the new
 * break). With FL_F_STACK_BIG (an anonymous mmap, when stacks are taken):
 * struct fl_regs, a u64 byte count, then that many stack bytes (padded to
 * 8), as an entry's. */
struct fl_sys {
	uint64_t args[5];
	int64_t ret;
};

/* FL_FREE: the function's address and the pointer. */
struct fl_free {
	uint64_t ip, ptr;
};

#endif
