/*
 * shim.c — faultline's in-process allocator recorder.
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
 *  - x86-64 only (the entry stubs below are x86-64 assembly).
 */
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
#include <time.h>
#include <unistd.h>

#include "abi.h"

#ifndef __x86_64__
#error "the shim's entry stubs are x86-64 assembly"
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define HIDDEN __attribute__((visibility("hidden")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* The allocator the program would have called. */
static struct {
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
} real;

/* The next operator new is libstdc++'s, which allocates with malloc: the
 * shim's own (below) may stand in for it. */
static int std_new;

/* Until `real` is resolved (dlsym may allocate), calls are served from
 * this arena and never freed. */
static char boot[16 << 10] __attribute__((aligned(64)));
static size_t boot_used;

static int is_boot(const void *p)
{
	return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	size_t at = __atomic_load_n(&boot_used, __ATOMIC_RELAXED);
	for (;;) {
		size_t start = (at + align - 1) & ~(align - 1);
		if (start + n > sizeof boot || start + n < start)
			return NULL;
		if (__atomic_compare_exchange_n(&boot_used, &at, start + n, 0,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return boot + start;
	}
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
};
static __thread struct tstate ts __attribute__((tls_model("initial-exec")));

static struct fl_ctrl *ctrl; /* NULL: not recording */
static int glibc;            /* the next malloc is glibc's: read chunk headers */
static uint8_t *region;
static size_t region_bytes;
static uint32_t gen = 1; /* bumped in a forked child: rings are per process */
static int state;        /* 0 new, 1 initializing, 2 ready */

static inline uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/*
 * The clock. Records are stamped with CLOCK_MONOTONIC, the clock of the
 * page faults' perf events. Read through the vDSO it cost 28-44 ns on the
 * virtual machine this was measured on, the largest part of a recorded
 * call's own cost (three reads per malloc and free). With ctrl->tsc (the
 * recorder sets it where the kernel's own clock reads the CPU's
 * time-stamp counter and the counter runs at a constant rate) a stamp is
 * the TSC (about 11 ns) converted from the thread's last pair of readings
 * of both clocks, which it takes again whenever FL_TSC_RECAL_NS have
 * passed since. The rate (ns per tick, << 32) is measured by each thread
 * between two of its pairs FL_TSC_BASE_NS to FL_TSC_RATE_MAX_NS apart,
 * and the process converts with the last one measured: recent, it follows
 * the kernel's slewing of CLOCK_MONOTONIC. Until a rate is known, stamps
 * read CLOCK_MONOTONIC.
 *
 * A stamp so made is off by at most half the distance of the pair's two
 * TSC reads (pairs further apart than FL_TSC_PAIR_NS are not used) and
 * the rate's error over FL_TSC_RECAL_NS (a rate measured over 2 ms from
 * such pairs is good to 1e-4: 2 ns over 20 µs). A thread's stamps never
 * go back (ts.last). A pair that disagrees by more than FL_TSC_SLACK_NS
 * with the thread's previous one, if that is at most FL_TSC_CHECK_NS old
 * (a counter that jumped, or that differs between CPUs), turns the TSC
 * off for the process and is counted in ctrl->tsc_jumps: that thread's
 * stamps since its previous pair, at most FL_TSC_RECAL_NS back, may be
 * off by the jump.
 */
#define FL_TSC_RECAL_NS 20000u
#define FL_TSC_BASE_NS 2000000u
#define FL_TSC_RATE_MAX_NS 100000000u
#define FL_TSC_PAIR_NS 200u
#define FL_TSC_SLACK_NS 1000
#define FL_TSC_CHECK_NS 100000u

static int use_tsc;        /* ctrl->tsc, until the counter jumps */
static uint64_t tsc_mul;   /* ns per tick << 32; 0: not known (yet) */
static uint64_t tsc_recal; /* FL_TSC_RECAL_NS in ticks */
static uint64_t tsc_gap_min = UINT64_MAX; /* the closest pair's ticks */

static inline uint64_t tsc_read(void) { return __builtin_ia32_rdtsc(); }

/* tsc_off stops every thread reading the TSC: use_tsc first, then
 * tsc_mul (tsc_calibrate relies on that order). */
static void tsc_off(void)
{
	__atomic_store_n(&use_tsc, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tsc_mul, 0, __ATOMIC_SEQ_CST);
}

static void tsc_jumped(uint64_t m)
{
	tsc_off();
	if (__atomic_add_fetch(&ctrl->tsc_jumps, 1, __ATOMIC_RELAXED) == 1)
		__atomic_store_n(&ctrl->tsc_jump_time, m, __ATOMIC_RELAXED);
}

/* tsc_calibrate reads both clocks, checks the pair against the thread's
 * previous one, keeps it, measures the rate, and returns CLOCK_MONOTONIC.
 * A pair stands for its CLOCK_MONOTONIC reading at the middle of its two
 * TSC reads, so its error is up to half their distance: a call of
 * clock_gettime on cold caches (the first after a sleep) takes several
 * times longer than a warm one, and a pair that took more than twice the
 * shortest the process has seen is read again, up to three times. */
static uint64_t __attribute__((noinline)) tsc_calibrate(void)
{
	uint64_t mul = __atomic_load_n(&tsc_mul, __ATOMIC_RELAXED);
	uint64_t gmin = __atomic_load_n(&tsc_gap_min, __ATOMIC_RELAXED);
	uint64_t good = gmin == UINT64_MAX ? 0 : 2 * gmin;
	uint64_t m = 0, pm = 0, c = 0, gap = UINT64_MAX;
	for (int i = 0; i < 3 && gap > good; i++) {
		uint64_t c0 = tsc_read();
		m = mono_ns();
		ts.ring->clock_reads++;
		uint64_t c1 = tsc_read();
		if (c1 >= c0 && c1 - c0 < gap) {
			gap = c1 - c0;
			pm = m;
			c = c0 + gap / 2;
		}
	}
	if (gap < gmin)
		__atomic_store_n(&tsc_gap_min, gap, __ATOMIC_RELAXED);
	/* Before the rate is known, FL_TSC_PAIR_NS cannot be told in ticks:
	 * four times the closest pair stands in for it. */
	if (gap == UINT64_MAX || (!mul && gmin != UINT64_MAX && gap > 4 * gmin) ||
	    (mul && (unsigned __int128)gap * mul >
			    (unsigned __int128)FL_TSC_PAIR_NS << 32))
		return m; /* no pair close enough: m alone */
	if (mul && ts.cal_c && pm - ts.cal_m <= FL_TSC_CHECK_NS) {
		__int128 pred = (__int128)ts.cal_m +
				(((__int128)(int64_t)(c - ts.cal_c) * mul) >> 32);
		__int128 off = pred - (__int128)pm;
		if (off > FL_TSC_SLACK_NS || off < -FL_TSC_SLACK_NS) {
			tsc_jumped(m);
			return m;
		}
	}
	ts.cal_m = pm;
	ts.cal_c = c;
	uint64_t span = pm - ts.base_m;
	if (ts.base_c && span >= FL_TSC_BASE_NS && span <= FL_TSC_RATE_MAX_NS &&
	    c > ts.base_c) {
		uint64_t nm = (uint64_t)(((unsigned __int128)span << 32) /
					 (c - ts.base_c));
		if (nm) {
			__atomic_store_n(&tsc_recal,
					 (uint64_t)(((uint64_t)FL_TSC_RECAL_NS
						     << 32) / nm),
					 __ATOMIC_RELAXED);
			__atomic_store_n(&tsc_mul, nm, __ATOMIC_SEQ_CST);
			/* tsc_off stores use_tsc, then tsc_mul: one of the
			 * two stores of 0 comes after this one. */
			if (!__atomic_load_n(&use_tsc, __ATOMIC_SEQ_CST))
				__atomic_store_n(&tsc_mul, 0, __ATOMIC_SEQ_CST);
		}
	}
	if (!ts.base_c || span >= FL_TSC_BASE_NS) {
		ts.base_m = pm;
		ts.base_c = c;
	}
	return m;
}

/* prctl(PR_SET_TSC, PR_TSC_SIGSEGV) makes RDTSC fault in the calling
 * thread and the threads it creates later: the shim stops reading the TSC
 * in every thread before the program's call, which goes straight to the
 * kernel. (A program that calls the syscall itself, not the C library's
 * prctl, is not seen: one that disables RDTSC that way is recorded with
 * --shim-clock monotonic.) */
__attribute__((visibility("default"))) int prctl(int option, ...)
{
	va_list ap;
	va_start(ap, option);
	unsigned long a2 = va_arg(ap, unsigned long);
	unsigned long a3 = va_arg(ap, unsigned long);
	unsigned long a4 = va_arg(ap, unsigned long);
	unsigned long a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_TSC)
		tsc_off();
	return (int)syscall(SYS_prctl, option, a2, a3, a4, a5);
}

static inline uint64_t now_ns(void)
{
	uint64_t t;
	uint64_t mul = __atomic_load_n(&tsc_mul, __ATOMIC_RELAXED);
	uint64_t d = mul ? tsc_read() - ts.cal_c : 0;
	if (likely(mul) && d < __atomic_load_n(&tsc_recal, __ATOMIC_RELAXED))
		t = ts.cal_m + (uint64_t)(((unsigned __int128)d * mul) >> 32);
	else if (__atomic_load_n(&use_tsc, __ATOMIC_RELAXED))
		t = tsc_calibrate();
	else {
		t = mono_ns();
		ts.ring->clock_reads++;
	}
	if (t < ts.last)
		t = ts.last;
	ts.last = t;
	return t;
}

static long futex(uint32_t *w, int op, uint32_t val, const struct timespec *t)
{
	return syscall(SYS_futex, w, op, val, t, NULL, 0);
}

static void after_fork_child(void)
{
	/* The child's threads (only the forking one) claim new rings. */
	__atomic_add_fetch(&gen, 1, __ATOMIC_RELAXED);
}

/* object_base returns the base name of the file of the object that holds
 * addr, or NULL. */
static const char *object_base(void *addr)
{
	Dl_info info;
	if (!dladdr(addr, &info) || !info.dli_fname)
		return NULL;
	const char *base = strrchr(info.dli_fname, '/');
	return base ? base + 1 : info.dli_fname;
}

/* collect_loaded collects the names of the loaded objects (not the
 * program, which defines no operator new when the shim's is called). */
struct loaded {
	int n;
	const char *name[256];
};

static int collect_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct loaded *l = data;
	if (info->dlpi_name && info->dlpi_name[0] && l->n < 256)
		l->name[l->n++] = info->dlpi_name;
	return 0;
}

/* loaded_new finds an operator new in a loaded object other than the
 * shim, through a handle of that object (*h, kept open): its own scope,
 * which dlsym(RTLD_NEXT) does not search for an object dlopen loaded. */
static void *loaded_new(void **h)
{
	struct loaded l;
	Dl_info self;
	if (!dladdr((void *)loaded_new, &self))
		return NULL;
	l.n = 0;
	dl_iterate_phdr(collect_loaded, &l);
	for (int i = 0; i < l.n; i++) {
		void *o = dlopen(l.name[i], RTLD_LAZY | RTLD_NOLOAD);
		if (!o)
			continue;
		Dl_info at;
		void *nw = dlsym(o, "_Znwm");
		if (nw && dladdr(nw, &at) && at.dli_fbase != self.dli_fbase) {
			*h = o;
			return nw;
		}
		dlclose(o);
	}
	return NULL;
}

/* resolve_new finds the operator new the program would have called: the
 * next definition, or for a library that dlopen brought in later (not in
 * the global scope RTLD_NEXT searches, though its calls bind to the
 * shim's operator new) the one its own scope holds, the object kept
 * loaded.
 * Only libstdc++'s operator new is stood in for (std_new); another
 * (libc++'s, tcmalloc's) is called as it is. Called at init and, while
 * none is found, again at a call of operator new. */
static void resolve_new(void)
{
	void *h = RTLD_NEXT;
	void *nw = dlsym(RTLD_NEXT, "_Znwm");
	if (!nw)
		nw = loaded_new(&h);
	if (!nw)
		return;
	real.op_new_array = dlsym(h, "_Znam");
	real.get_new_handler = dlsym(h, "_ZSt15get_new_handlerv");
	real.throw_bad_alloc = dlsym(h, "_ZSt17__throw_bad_allocv");
	const char *base = object_base(nw);
	int std = real.op_new_array && real.get_new_handler &&
		  real.throw_bad_alloc && base &&
		  strncmp(base, "libstdc++.so", 12) == 0;
	__atomic_store_n(&std_new, std, __ATOMIC_RELAXED);
	/* Last: a call that sees op_new set sees the rest. */
	__atomic_store_n(&real.op_new, (void *(*)(size_t))nw, __ATOMIC_RELEASE);
}

static void resolve(void)
{
	real.malloc = dlsym(RTLD_NEXT, "malloc");
	real.calloc = dlsym(RTLD_NEXT, "calloc");
	real.realloc = dlsym(RTLD_NEXT, "realloc");
	real.reallocarray = dlsym(RTLD_NEXT, "reallocarray");
	real.free = dlsym(RTLD_NEXT, "free");
	real.memalign = dlsym(RTLD_NEXT, "memalign");
	real.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	real.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	real.valloc = dlsym(RTLD_NEXT, "valloc");
	real.pvalloc = dlsym(RTLD_NEXT, "pvalloc");
	/* Chunk headers are glibc's: another allocator (preloaded after the
	 * shim, say) keeps no header there, and reading the word before its
	 * block could fault a page the program never touches. */
	const char *base = real.malloc ? object_base((void *)real.malloc) : NULL;
	glibc = base && (strncmp(base, "libc.so.6", 9) == 0 || strncmp(base, "libc-", 5) == 0);
	resolve_new();
}

/* The launcher's entry point (below). */
extern char fl_launch_start[] HIDDEN;

/* attach maps the recorder's region named by FL_ENV: not in the launcher,
 * whose own allocations are not the program's. */
static void attach(void)
{
	if (getauxval(AT_ENTRY) == (unsigned long)fl_launch_start)
		return;
	const char *e = getenv(FL_ENV);
	if (!e)
		return;
	unsigned long pid = 0, fd = 0, ino = 0;
	const char *p = e;
	unsigned long *v[3] = {&pid, &fd, &ino};
	for (int i = 0; i < 3; i++) {
		if (*p < '0' || *p > '9')
			return;
		while (*p >= '0' && *p <= '9')
			*v[i] = *v[i] * 10 + (unsigned long)(*p++ - '0');
		if (i < 2 && *p++ != ':')
			return;
	}
	if (*p)
		return;
	char path[64];
	char digits[2][24];
	unsigned long nums[2] = {pid, fd};
	for (int i = 0; i < 2; i++) {
		char tmp[24];
		int n = 0;
		unsigned long x = nums[i];
		do
			tmp[n++] = (char)('0' + x % 10);
		while ((x /= 10) != 0);
		for (int j = 0; j < n; j++)
			digits[i][j] = tmp[n - 1 - j];
		digits[i][n] = 0;
	}
	strcpy(path, "/proc/");
	strcat(path, digits[0]);
	strcat(path, "/fd/");
	strcat(path, digits[1]);
	int f = open(path, O_RDWR | O_CLOEXEC);
	if (f < 0)
		return;
	struct stat st;
	if (fstat(f, &st) != 0 || st.st_ino != ino || st.st_size < FL_CTRL_BYTES) {
		close(f);
		return;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_NORESERVE, f, 0);
	close(f);
	if (m == MAP_FAILED)
		return;
	struct fl_ctrl *c = m;
	/* Populated now, the control block never faults while recording. */
	madvise(m, FL_CTRL_BYTES, MADV_POPULATE_WRITE);
	size_t need = FL_CTRL_BYTES +
		      (size_t)c->nslots * (FL_RING_HDR + (size_t)c->ring_bytes);
	if (c->magic != FL_MAGIC || c->version != FL_VERSION ||
	    c->nslots == 0 || c->nslots > FL_MAX_SLOTS ||
	    c->ring_bytes < (256u << 10) ||
	    (c->ring_bytes & (c->ring_bytes - 1)) != 0 ||
	    c->words > FL_MAX_WORDS || c->stack_size > FL_MAX_STACK ||
	    need > (size_t)st.st_size) {
		munmap(m, (size_t)st.st_size);
		return;
	}
	region = m;
	region_bytes = (size_t)st.st_size;
	/* A program that made RDTSC fault (prctl PR_SET_TSC) keeps the
	 * vDSO. */
	int tsc_mode = 0;
	if (c->tsc && prctl(PR_GET_TSC, &tsc_mode, 0, 0, 0) == 0 &&
	    tsc_mode == PR_TSC_ENABLE)
		use_tsc = 1;
	pthread_atfork(NULL, NULL, after_fork_child);
	__atomic_store_n(&ctrl, c, __ATOMIC_RELEASE);
}

/* The program's own code: the executable segments of the program itself
 * (the first object dl_iterate_phdr reports, the one without a name). An
 * allocating call returning there was made by the program, whose return
 * address alone is the site: its entry carries that word only
 * (FL_F_SHORT), which is what the recorder writes for it anyway. */
#define MAX_OWN 4
static struct {
	uint64_t lo, hi;
} own[MAX_OWN];
static int nown;

static int find_own(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (info->dlpi_name && info->dlpi_name[0])
		return 1;
	for (int i = 0; i < info->dlpi_phnum && nown < MAX_OWN; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X))
			continue;
		own[nown].lo = info->dlpi_addr + p->p_vaddr;
		own[nown].hi = own[nown].lo + p->p_memsz;
		nown++;
	}
	return 1; /* the program is the first object */
}

static inline int own_code(uint64_t pc)
{
	for (int i = 0; i < nown; i++)
		if (pc - own[i].lo < own[i].hi - own[i].lo)
			return 1;
	return 0;
}

/* init runs once, at the first allocator call of the process (which may
 * come from the dynamic linker before any constructor). */
static void init(void)
{
	int s = 0;
	if (__atomic_compare_exchange_n(&state, &s, 1, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		ts.depth++;
		ts.own++;
		resolve();
		dl_iterate_phdr(find_own, NULL);
		attach();
		ts.own--;
		ts.depth--;
		__atomic_store_n(&state, 2, __ATOMIC_RELEASE);
		return;
	}
	if (ts.depth)
		return; /* this thread is initializing: boot arena */
	while (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2)
		sched_yield();
}

static inline struct fl_ring *ring_at(uint32_t i)
{
	return (struct fl_ring *)(region + FL_CTRL_BYTES +
				  (size_t)i * (FL_RING_HDR + ctrl->ring_bytes));
}

/* How much of a ring is populated at a time: a thread that makes few
 * calls touches little of its ring, and one that fills it maps each step
 * in one system call, not a page fault per page. */
#define FL_POP_STEP (256u << 10)

/* populate maps n bytes at p with MADV_POPULATE_WRITE (Linux 5.14; before
 * that the pages fault in as they are written), keeping errno. */
static void populate(void *p, size_t n)
{
	int e = errno;
	madvise(p, n, MADV_POPULATE_WRITE);
	errno = e;
}

static struct fl_ring *claim(void)
{
	uint32_t n = ctrl->nslots;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t free_ = FL_SLOT_FREE;
		if (!__atomic_compare_exchange_n(&ctrl->slot_state[i], &free_,
						 FL_SLOT_CLAIMED, 0,
						 __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		struct fl_ring *r = ring_at(i);
		/* The header and the first step of the data (a ring holds
		 * at least one: attach checks): the rest as the thread gets
		 * to it (begin). */
		populate(r, FL_RING_HDR + FL_POP_STEP);
		ts.pop_end = FL_POP_STEP;
		r->head = 0;
		r->busy = 0;
		r->waiting = 0;
		r->nested = 0;
		r->interrupted = 0;
		r->waits = 0;
		r->clock_reads = 0;
		r->tail = 0;
		r->tid = (uint32_t)syscall(SYS_gettid);
		/* pid last: a non-zero pid tells the recorder the ring is live. */
		__atomic_store_n(&r->pid, (uint32_t)getpid(), __ATOMIC_RELEASE);
		return r;
	}
	__atomic_add_fetch(&ctrl->slots_full, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* stack_bounds finds the mapping that holds this thread's stack in
 * /proc/self/maps, read with a small buffer on the stack: nothing is
 * allocated (an allocation here would move the program's own heap). */
extern void *__libc_stack_end;

static void stack_bounds(void)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[512];
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		char *line = buf, *end = buf + have;
		for (;;) {
			char *nl = memchr(line, '\n', (size_t)(end - line));
			if (!nl)
				break;
			/* "lo-hi perms ..." in hex */
			uintptr_t v[2] = {0, 0};
			char *p = line;
			for (int i = 0; i < 2; i++, p++) {
				for (;; p++) {
					unsigned d;
					if (*p >= '0' && *p <= '9')
						d = (unsigned)(*p - '0');
					else if (*p >= 'a' && *p <= 'f')
						d = (unsigned)(*p - 'a' + 10);
					else
						break;
					v[i] = v[i] << 4 | d;
				}
			}
			if (sp >= v[0] && sp < v[1]) {
				ts.stack_lo = v[0];
				ts.stack_hi = ts.copy_hi = v[1];
				/* The main thread's stack holds argv, the environment
				 * and the auxiliary vector above _start's frame, which
				 * no unwinding reads: copies stop a little above where
				 * the loader left the stack pointer. */
				uintptr_t end = (uintptr_t)__libc_stack_end + 256;
				if (end > sp && end < v[1])
					ts.copy_hi = end;
				close(fd);
				return;
			}
			line = nl + 1;
		}
		have = (size_t)(end - line);
		memmove(buf, line, have);
		if (have == sizeof buf - 1)
			have = 0; /* a line longer than the buffer: skip it */
	}
	close(fd);
}

/* ring returns this thread's ring, claiming one at its first call (and
 * again after fork), or NULL when the call is not to be recorded. On
 * success the shim is marked running (ts.depth); the caller calls done(). */
static struct fl_ring *ring(void)
{
	if (unlikely(__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2))
		init();
	struct fl_ctrl *c = __atomic_load_n(&ctrl, __ATOMIC_ACQUIRE);
	if (!c)
		return NULL;
	if (unlikely(ts.depth)) {
		/* The shim's own work calling the allocator, or a signal
		 * handler that interrupted the shim: either way the ring is
		 * mid-record (or being claimed) and this call cannot be
		 * written. A handler's call during the thread's claim has no
		 * ring to count in: it counts as unrecorded. */
		if (ts.own) {
			if (ts.ring)
				ts.ring->nested++;
		} else if (ts.ring) {
			ts.ring->interrupted++;
		} else {
			__atomic_add_fetch(&c->unrecorded, 1, __ATOMIC_RELAXED);
		}
		return NULL;
	}
	if (unlikely(__atomic_load_n(&c->detached, __ATOMIC_RELAXED)))
		return NULL;
	if (unlikely(__atomic_load_n(&c->abandoned, __ATOMIC_RELAXED))) {
		__atomic_add_fetch(&c->unrecorded, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	uint32_t g = __atomic_load_n(&gen, __ATOMIC_RELAXED);
	if (unlikely(ts.gen != g)) {
		ts.depth++;
		ts.gen = g;
		ts.ring = claim();
		ts.off = ts.ring == NULL;
		ts.count = 0;
		ts.calls = 0;
		ts.stack_lo = ts.stack_hi = ts.copy_hi = 0;
		if (ts.ring)
			stack_bounds();
		ts.depth--;
	}
	if (unlikely(ts.off)) {
		__atomic_add_fetch(&c->unrecorded, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	ts.depth++;
	return ts.ring;
}

static inline void done(void) { ts.depth--; }

/* wait_room blocks until the ring has room for `need` more bytes at head;
 * it returns 0 when recording must stop (recorder gone or stopped). */
static int __attribute__((noinline)) wait_room(struct fl_ring *r, uint64_t need)
{
	uint64_t start = now_ns();
	r->waits++;
	/* A call recorded whole (FL_CALL) keeps the ring busy from its entry;
	 * a thread that waits is not busy. (Only a record a signal handler
	 * wrote inside such a call can take the room its entry made, so its
	 * entry time may come out older than the recorder's look.) */
	__atomic_store_n(&r->busy, 0, __ATOMIC_RELAXED);
	for (;;) {
		uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (r->head + need - tail <= ctrl->ring_bytes)
			return 1;
		if (__atomic_load_n(&ctrl->detached, __ATOMIC_RELAXED))
			return 0;
		uint64_t t = now_ns();
		if (t - start > ctrl->wait_ns) {
			uint32_t zero = 0;
			if (__atomic_compare_exchange_n(&ctrl->abandoned, &zero, 1,
							0, __ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED))
				ctrl->abandoned_time = t;
			return 0;
		}
		uint32_t seq = __atomic_load_n(&r->tail_seq, __ATOMIC_ACQUIRE);
		__atomic_store_n(&r->waiting, 1, __ATOMIC_SEQ_CST);
		tail = __atomic_load_n(&r->tail, __ATOMIC_SEQ_CST);
		if (r->head + need - tail <= ctrl->ring_bytes) {
			__atomic_store_n(&r->waiting, 0, __ATOMIC_RELAXED);
			return 1;
		}
		__atomic_add_fetch(&ctrl->wake, 1, __ATOMIC_SEQ_CST);
		futex(&ctrl->wake, FUTEX_WAKE, 1, NULL);
		struct timespec ten_ms = {0, 10 * 1000 * 1000};
		futex(&r->tail_seq, FUTEX_WAIT, seq, &ten_ms);
		__atomic_store_n(&r->waiting, 0, __ATOMIC_RELAXED);
	}
}

/* How far ahead of a record begin asks for the ring's bytes: 16 cache
 * lines, about seven calls. */
#define FL_PREFETCH 1024

/* populate_more maps the ring's data up to the step that holds byte
 * `need` (a head, before the ring first wraps). */
static void __attribute__((noinline)) populate_more(struct fl_ring *r, uint64_t need)
{
	uint32_t rb = ctrl->ring_bytes;
	uint64_t end = (need + FL_POP_STEP) & ~(uint64_t)(FL_POP_STEP - 1);
	if (end > rb)
		end = rb;
	populate((uint8_t *)r + FL_RING_HDR + ts.pop_end, end - ts.pop_end);
	ts.pop_end = end == rb ? ~(uint64_t)0 : end;
}

/* make_room makes the ring hold size more bytes at head (and the pad
 * that would take it to the ring's start), populated, waiting for room if
 * need be; it returns the pad, or -1 when recording must stop. */
static inline int64_t make_room(struct fl_ring *r, uint32_t size)
{
	uint32_t rb = ctrl->ring_bytes;
	uint64_t head = r->head;
	/* The bytes this record and begin's prefetch reach, populated
	 * before the time is read. */
	if (unlikely(head + size + FL_PREFETCH >= ts.pop_end))
		populate_more(r, head + size + FL_PREFETCH);
	uint32_t off = (uint32_t)head & (rb - 1);
	uint32_t pad = off + size > rb ? rb - off : 0;
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	if (unlikely(head + pad + size - tail > rb) && !wait_room(r, pad + size))
		return -1;
	return pad;
}

/* begin reserves size bytes, marks the ring busy and stamps the time;
 * commit publishes the record. Between the two nothing can be preempted
 * out of order: a recorder that sees the ring idle knows every later
 * record of it is stamped later than its look. */
static inline struct fl_rec *begin(struct fl_ring *r, uint32_t size)
{
	uint32_t rb = ctrl->ring_bytes;
	int64_t room = make_room(r, size);
	if (room < 0)
		return NULL;
	uint32_t pad = (uint32_t)room;
	uint64_t head = r->head;
	uint32_t off = (uint32_t)head & (rb - 1);
	uint8_t *data = (uint8_t *)r + FL_RING_HDR;
	if (pad) {
		struct fl_rec *p = (struct fl_rec *)(data + off);
		p->size = pad;
		p->kind = FL_PAD;
		head += pad;
		/* Seen by the recorder no earlier than the pad record itself. */
		__atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
		off = 0;
	}
	/* A plain store, not a fenced exchange: the recorder trusts a ring
	 * seen idle only for records stamped watermarkMargin (100 µs) before
	 * its look, and a store leaves the store buffer far sooner (an
	 * interrupt or preemption in between drains it). The exchange's
	 * fence waited, on every record, for the record bytes before it to
	 * reach a cache line the recorder was reading: a third of a call's
	 * time. */
	__atomic_store_n(&r->busy, 1, __ATOMIC_RELAXED);
	/* Ask for the ring's bytes FL_PREFETCH ahead, to be written: the
	 * recorder read them last, on another CPU, and a store to a line
	 * another CPU holds waits for it; asked early, the wait overlaps
	 * this call's work (PREFETCHW; a hint, it never faults). */
	__builtin_prefetch(data + ((off + FL_PREFETCH) & (rb - 1)), 1, 3);
	struct fl_rec *rec = (struct fl_rec *)(data + off);
	rec->size = size;
	rec->time = now_ns();
	return rec;
}

static inline void commit(struct fl_ring *r, struct fl_rec *rec)
{
	uint32_t rb = ctrl->ring_bytes;
	uint64_t old = r->head;
	uint64_t head = old + rec->size;
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
	__atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
	/* Still busy while a call recorded whole is in flight (a record
	 * written by a signal handler inside it). */
	__atomic_store_n(&r->busy, ts.calls != 0, __ATOMIC_RELEASE);
	/* Wake a sleeping recorder when the ring passes half full. */
	if (unlikely(head - tail >= rb / 2 && old - tail < rb / 2) &&
	    __atomic_load_n(&ctrl->sleeping, __ATOMIC_SEQ_CST)) {
		__atomic_add_fetch(&ctrl->wake, 1, __ATOMIC_SEQ_CST);
		futex(&ctrl->wake, FUTEX_WAKE, 1, NULL);
	}
}

/* Saved by the entry stubs: rbx, rbp, r12..r15 at the function's entry;
 * the entry stack pointer is saved + STUB_FRAME. */
#define STUB_FRAME 72
struct saved {
	uint64_t rbx, rbp, r12, r13, r14, r15;
};

static inline uint64_t entry_sp(const struct saved *s)
{
	return (uint64_t)s + STUB_FRAME;
}

/* A call between its entry and its return. time != 0: its entry wrote
 * nothing, the call is written whole at its return (FL_CALL) with the
 * entry's time, arguments and stack pointer kept here. */
struct call {
	uint64_t time, a0, a1, sp;
};

#define CALL_BYTES (sizeof(struct fl_rec) + sizeof(struct fl_call))

/* whole reports whether a call to fn can be an FL_CALL record: at most
 * two arguments and no status. */
static inline int whole(int fn)
{
	return fn != FL_FN_FREE && fn != FL_FN_REALLOCARRAY &&
	       fn != FL_FN_POSIX_MEMALIGN;
}

/* entry records a call's entry: size is what decides whether it gets a
 * stack (the bytes it asks for). A call from the program's own executable
 * without a stack writes nothing yet: it is written whole at its return,
 * one record instead of two (room made for it now, the ring busy from the
 * time read here, so a recorder that sees the ring idle knows the entry is
 * later than its look). */
static void entry(struct fl_ring *r, int fn, void *ip, uint64_t a0,
		  uint64_t a1, uint64_t a2, uint64_t size,
		  const struct saved *s, struct call *c)
{
	uint64_t sp = entry_sp(s);
	c->time = 0;
	uint32_t words = ctrl->words;
	uint16_t flags = 0;
	uint64_t stack = 0;
	if (ctrl->stack_size && fn != FL_FN_FREE) {
		if (size >= ctrl->stack_min)
			flags = FL_F_STACK_BIG;
		else if (++ts.count >= ctrl->stack_every) {
			ts.count = 0;
			flags = FL_F_STACK_SMALL;
		}
		if (flags && sp >= ts.stack_lo && sp < ts.copy_hi) {
			stack = ts.copy_hi - sp;
			if (stack > ctrl->stack_size)
				stack = ctrl->stack_size;
		}
	}
	if (!flags && fn != FL_FN_FREE && own_code(*(const uint64_t *)sp)) {
		if (whole(fn)) {
			/* -1: recording stopped while this thread waited for
			 * room; the call goes unrecorded, without a second wait
			 * for a short entry's room. */
			if (make_room(r, CALL_BYTES) < 0)
				return;
			ts.calls++;
			__atomic_store_n(&r->busy, 1, __ATOMIC_RELAXED);
			c->time = now_ns();
			c->a0 = a0;
			c->a1 = a1;
			c->sp = sp;
			return;
		}
		flags = FL_F_SHORT;
		words = 1;
	}
	uint32_t nwords = words; /* carried: past the stack's top, zeros */
	if (ts.stack_hi && sp + 8 * words > ts.stack_hi)
		words = sp < ts.stack_hi ? (uint32_t)((ts.stack_hi - sp) / 8) : 0;
	uint32_t size_ = sizeof(struct fl_rec) + sizeof(struct fl_entry) +
			 8 * nwords;
	if (flags & (FL_F_STACK_BIG | FL_F_STACK_SMALL))
		size_ += sizeof(struct fl_regs) + 8 + (uint32_t)((stack + 7) & ~7ull);
	struct fl_rec *rec = begin(r, size_);
	if (!rec)
		return;
	rec->kind = FL_ENTRY;
	rec->fn = (uint8_t)fn;
	rec->flags = flags;
	struct fl_entry *e = (struct fl_entry *)(rec + 1);
	e->ip = (uint64_t)ip;
	e->args[0] = a0;
	e->args[1] = a1;
	e->args[2] = a2;
	e->sp = sp;
	e->bp = s->rbp;
	uint64_t *w = (uint64_t *)(e + 1);
	memcpy(w, (void *)sp, 8 * words);
	memset(w + words, 0, 8 * (nwords - words));
	if (flags & (FL_F_STACK_BIG | FL_F_STACK_SMALL)) {
		struct fl_regs *g = (struct fl_regs *)(w + nwords);
		g->bx = s->rbx;
		g->bp = s->rbp;
		g->sp = sp;
		g->ip = (uint64_t)ip;
		g->r12 = s->r12;
		g->r13 = s->r13;
		g->r14 = s->r14;
		g->r15 = s->r15;
		uint64_t *n = (uint64_t *)(g + 1);
		*n = stack;
		memcpy(n + 1, (void *)sp, stack);
	}
	commit(r, rec);
}

/* put_return writes a return's first four fields, which a whole call's
 * record (fl_call) starts with too: ip, ptr, hdr, ret_ip. */
static inline void put_return(uint64_t *x, void *ip, void *ptr,
			      const struct saved *s)
{
	x[0] = (uint64_t)ip;
	x[1] = (uint64_t)ptr;
	/* glibc's chunk header (size and flags) is the word before the
	 * pointer; malloc wrote it, so reading it faults nothing. */
	x[2] = glibc && ctrl->glibc && ptr ? ((const uint64_t *)ptr)[-1] : 0;
	x[3] = *(const uint64_t *)entry_sp(s);
}

static void ret(struct fl_ring *r, int fn, void *ip, void *ptr, uint64_t status,
		const struct saved *s)
{
	struct fl_rec *rec = begin(r, sizeof(struct fl_rec) + sizeof(struct fl_return));
	if (!rec)
		return;
	rec->kind = FL_RETURN;
	rec->fn = (uint8_t)fn;
	rec->flags = 0;
	struct fl_return *x = (struct fl_return *)(rec + 1);
	put_return(&x->ip, ip, ptr, s);
	x->status = status;
	commit(r, rec);
}

/* whole_ret writes a call recorded whole (entry() kept its entry in c). */
static void whole_ret(struct fl_ring *r, int fn, void *ip, void *ptr,
		      const struct saved *s, const struct call *c)
{
	struct fl_rec *rec = begin(r, CALL_BYTES);
	ts.calls--; /* before commit, which leaves the ring busy while any is left */
	if (!rec)
		return; /* wait_room gave up, and left the ring not busy */
	rec->kind = FL_CALL;
	rec->fn = (uint8_t)fn;
	rec->flags = FL_F_SHORT;
	struct fl_call *x = (struct fl_call *)(rec + 1);
	put_return(&x->ip, ip, ptr, s);
	x->entry_time = c->time;
	x->args[0] = c->a0;
	x->args[1] = c->a1;
	x->sp = c->sp;
	commit(r, rec);
}

/* returned records a call's return on ring r, if this thread still
 * records into r (not after a fork in the call, say), keeping the errno
 * the allocator left. */
static inline void returned(struct fl_ring *r, int fn, void *ip, void *ptr,
			    uint64_t status, const struct saved *s,
			    const struct call *c)
{
	int e = errno;
	if (ring() == r) {
		if (c->time)
			whole_ret(r, fn, ip, ptr, s, c);
		else
			ret(r, fn, ip, ptr, status, s);
		done();
	} else if (c->time && ts.ring == r && ts.calls && !--ts.calls) {
		/* Not recorded (the recorder stopped): not busy either. */
		__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
	}
	errno = e;
}

/* The implementations, called by the stubs with the saved registers. */

HIDDEN void *fl_malloc(size_t n, const struct saved *s)
{
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!real.malloc))
			return boot_alloc(n, 16);
		return real.malloc(n);
	}
	struct call c;
	entry(r, FL_FN_MALLOC, real.malloc, n, 0, 0, n, s, &c);
	done();
	void *p = real.malloc(n);
	returned(r, FL_FN_MALLOC, real.malloc, p, 0, s, &c);
	return p;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	uint64_t p;
	return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

HIDDEN void *fl_calloc(size_t m, size_t n, const struct saved *s)
{
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!real.calloc)) {
			uint64_t b = mul_sat(m, n);
			/* The arena is zeroed static memory never reused. */
			return b == UINT64_MAX ? NULL : boot_alloc(b, 16);
		}
		return real.calloc(m, n);
	}
	struct call c;
	entry(r, FL_FN_CALLOC, real.calloc, m, n, 0, mul_sat(m, n), s, &c);
	done();
	void *p = real.calloc(m, n);
	returned(r, FL_FN_CALLOC, real.calloc, p, 0, s, &c);
	return p;
}

static void *boot_realloc(void *old, size_t n)
{
	void *p = real.malloc ? real.malloc(n) : boot_alloc(n, 16);
	if (p && old) {
		size_t have = (size_t)(boot + sizeof boot - (char *)old);
		memcpy(p, old, have < n ? have : n);
	}
	return p;
}

HIDDEN void *fl_realloc(void *old, size_t n, const struct saved *s)
{
	if (unlikely(is_boot(old)))
		return boot_realloc(old, n);
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!real.realloc))
			return boot_realloc(old, n);
		return real.realloc(old, n);
	}
	struct call c;
	entry(r, FL_FN_REALLOC, real.realloc, (uint64_t)old, n, 0, n, s, &c);
	done();
	void *p = real.realloc(old, n);
	returned(r, FL_FN_REALLOC, real.realloc, p, 0, s, &c);
	return p;
}

HIDDEN void *fl_reallocarray(void *old, size_t m, size_t n, const struct saved *s)
{
	if (unlikely(is_boot(old) || !real.reallocarray)) {
		uint64_t b = mul_sat(m, n);
		if (b == UINT64_MAX) {
			errno = ENOMEM;
			return NULL;
		}
		return fl_realloc(old, b, s);
	}
	struct fl_ring *r = ring();
	if (!r)
		return real.reallocarray(old, m, n);
	struct call c;
	entry(r, FL_FN_REALLOCARRAY, real.reallocarray, (uint64_t)old, m, n,
	      mul_sat(m, n), s, &c);
	done();
	void *p = real.reallocarray(old, m, n);
	returned(r, FL_FN_REALLOCARRAY, real.reallocarray, p, 0, s, &c);
	return p;
}

/* The aligned family: fn says which entry point, all call one shape. */
static void *aligned(int fn, void *(*f)(size_t, size_t), size_t al, size_t n,
		     const struct saved *s)
{
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!f))
			return boot_alloc(n, al);
		return f(al, n);
	}
	struct call c;
	entry(r, fn, f, al, n, 0, n, s, &c);
	done();
	void *p = f(al, n);
	returned(r, fn, f, p, 0, s, &c);
	return p;
}

HIDDEN void *fl_memalign(size_t al, size_t n, const struct saved *s)
{
	return aligned(FL_FN_MEMALIGN, real.memalign, al, n, s);
}

HIDDEN void *fl_aligned_alloc(size_t al, size_t n, const struct saved *s)
{
	return aligned(FL_FN_ALIGNED_ALLOC, real.aligned_alloc, al, n, s);
}

HIDDEN int fl_posix_memalign(void **out, size_t al, size_t n, const struct saved *s)
{
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!real.posix_memalign)) {
			*out = boot_alloc(n, al);
			return *out ? 0 : ENOMEM;
		}
		return real.posix_memalign(out, al, n);
	}
	struct call c;
	entry(r, FL_FN_POSIX_MEMALIGN, real.posix_memalign, (uint64_t)out, al, n, n, s, &c);
	done();
	int st = real.posix_memalign(out, al, n);
	returned(r, FL_FN_POSIX_MEMALIGN, real.posix_memalign,
		 st == 0 ? *out : NULL, (uint64_t)(unsigned)st, s, &c);
	return st;
}

static void *paged(int fn, void *(*f)(size_t), size_t n, const struct saved *s)
{
	struct fl_ring *r = ring();
	if (!r) {
		if (unlikely(!f))
			return boot_alloc(n, 4096);
		return f(n);
	}
	struct call c;
	entry(r, fn, f, n, 0, 0, n, s, &c);
	done();
	void *p = f(n);
	returned(r, fn, f, p, 0, s, &c);
	return p;
}

HIDDEN void *fl_valloc(size_t n, const struct saved *s)
{
	return paged(FL_FN_VALLOC, real.valloc, n, s);
}

HIDDEN void *fl_pvalloc(size_t n, const struct saved *s)
{
	return paged(FL_FN_PVALLOC, real.pvalloc, n, s);
}

/* free needs no registers: frees never get stacks. */
__attribute__((visibility("default"))) void free(void *p)
{
	if (unlikely(is_boot(p)))
		return;
	struct fl_ring *r = ring();
	if (!r) {
		if (likely(real.free != NULL))
			real.free(p);
		return;
	}
	struct fl_rec *rec = begin(r, sizeof(struct fl_rec) + sizeof(struct fl_free));
	if (rec) {
		rec->kind = FL_FREE;
		rec->fn = FL_FN_FREE;
		rec->flags = 0;
		struct fl_free *f = (struct fl_free *)(rec + 1);
		f->ip = (uint64_t)real.free;
		f->ptr = (uint64_t)p;
		commit(r, rec);
	}
	done();
	real.free(p);
}

/*
 * operator new. libstdc++'s (new_op.cc) calls malloc (through the PLT)
 * with the size, 1 for 0, and while malloc fails calls the new-handler,
 * or throws bad_alloc when there is none; new[] calls operator new. The
 * shim stands in for both, doing the same with libstdc++'s own
 * get_new_handler and __throw_bad_alloc, and records each malloc call as
 * libstdc++ would make it — but with the registers and return address at
 * operator new's entry: the call's return address is then the program's
 * call site, which the recorder writes without stack words, and a stack
 * taken here unwinds from malloc straight to that site. bad_alloc unwinds
 * through the shim (its stubs carry CFI, and it holds nothing across the
 * throw). The nothrow forms are libstdc++'s: they call operator new inside
 * a try block, which a C function cannot mimic (they reach the shim's).
 */
static void *op_new(size_t n, const struct saved *s)
{
	for (;;) {
		void *p = fl_malloc(n ? n : 1, s);
		if (likely(p != NULL))
			return p;
		void (*h)(void) = real.get_new_handler();
		if (!h)
			real.throw_bad_alloc();
		h();
	}
}

/* new_ready reports whether the shim stands in for operator new; when it
 * does not, the next operator new (real.op_new, real.op_new_array) runs,
 * or, while no C++ runtime can be found (a call during the shim's own
 * init), the boot arena serves. */
static int new_ready(void)
{
	if (unlikely(__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2))
		init();
	if (unlikely(!__atomic_load_n(&real.op_new, __ATOMIC_ACQUIRE)) && !ts.depth) {
		ts.depth++;
		ts.own++;
		resolve_new();
		ts.own--;
		ts.depth--;
	}
	return __atomic_load_n(&std_new, __ATOMIC_RELAXED);
}

/* no_new serves an operator new call when no loaded object defines one
 * but the shim (a call from the shim's own init, or a runtime that cannot
 * be found): malloc, and abort where operator new would throw. */
static void *no_new(size_t n, const struct saved *s)
{
	if (ts.depth)
		return boot_alloc(n ? n : 1, 16);
	void *p = fl_malloc(n ? n : 1, s);
	if (!p)
		abort();
	return p;
}

HIDDEN void *fl_op_new(size_t n, const struct saved *s)
{
	if (unlikely(!new_ready())) {
		void *(*next)(size_t) = __atomic_load_n(&real.op_new, __ATOMIC_ACQUIRE);
		return next ? next(n) : no_new(n, s);
	}
	return op_new(n, s);
}

HIDDEN void *fl_op_new_array(size_t n, const struct saved *s)
{
	if (unlikely(!new_ready())) {
		void *(*next)(size_t) = __atomic_load_n(&real.op_new, __ATOMIC_ACQUIRE) ? real.op_new_array : NULL;
		return next ? next(n) : no_new(n, s);
	}
	return op_new(n, s);
}

/*
 * Entry stubs: save the callee-saved registers (what DWARF unwinding of
 * the callers needs) below the return address and pass their address as
 * the argument after the function's own. 72 bytes keep the stack 16-byte
 * aligned at the call.
 */
#define STUB(name, impl, reg)                                           \
	".globl " #name "\n"                                            \
	".type " #name ", @function\n"                                  \
	#name ":\n"                                                     \
	".cfi_startproc\n"                                              \
	"subq $72, %rsp\n"                                              \
	".cfi_adjust_cfa_offset 72\n"                                   \
	"movq %rbx, 0(%rsp)\n"                                          \
	"movq %rbp, 8(%rsp)\n"                                          \
	"movq %r12, 16(%rsp)\n"                                         \
	"movq %r13, 24(%rsp)\n"                                         \
	"movq %r14, 32(%rsp)\n"                                         \
	"movq %r15, 40(%rsp)\n"                                         \
	"movq %rsp, " reg "\n"                                          \
	"call " #impl "\n"                                              \
	"addq $72, %rsp\n"                                              \
	".cfi_adjust_cfa_offset -72\n"                                  \
	"ret\n"                                                         \
	".cfi_endproc\n"                                                \
	".size " #name ", .-" #name "\n"

__asm__(".text\n"
	STUB(malloc, fl_malloc, "%rsi")
	STUB(calloc, fl_calloc, "%rdx")
	STUB(realloc, fl_realloc, "%rdx")
	STUB(reallocarray, fl_reallocarray, "%rcx")
	STUB(memalign, fl_memalign, "%rdx")
	STUB(aligned_alloc, fl_aligned_alloc, "%rdx")
	STUB(posix_memalign, fl_posix_memalign, "%rcx")
	STUB(valloc, fl_valloc, "%rsi")
	STUB(pvalloc, fl_pvalloc, "%rsi")
	STUB(_Znwm, fl_op_new, "%rsi")
	STUB(_Znam, fl_op_new_array, "%rsi"));

/*
 * The launcher. faultline record starts the command it records through
 * this object run as a program — it has an interpreter (PT_INTERP) and an
 * entry point, fl_launch_start — which costs a few milliseconds less than
 * starting faultline's own Go runtime again for the same job. It keeps
 * the protocol of faultline's Go launcher (package launch, which remains
 * the launcher where the shim cannot run):
 *  - argv is the command's argv[0], the command's path, then the command's
 *    argv from its argv[0];
 *  - FAULTLINE_RECORD_LAUNCH is "1", or "nothp" for transparent huge pages
 *    off; FAULTLINE_RECORD_PRELOAD becomes LD_PRELOAD (replacing one in
 *    the environment); both leave the command's environment;
 *  - it asks for SIGKILL when the thread that started it exits
 *    (PR_SET_PDEATHSIG, kept across the exec), then waits for one byte on
 *    file descriptor 3: EOF (the recorder gone or giving up) exits 127
 *    without running the command;
 *  - a command that cannot be run exits 127, as a shell's.
 */
#define LAUNCH_ENV "FAULTLINE_RECORD_LAUNCH="
#define LAUNCH_PRELOAD "FAULTLINE_RECORD_PRELOAD="
#define LD_PRELOAD_ "LD_PRELOAD="

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static __attribute__((noreturn)) void launch_fail(const char *what, const char *arg)
{
	const char *why = strerror(errno);
	dprintf(2, "faultline: %s%s: %s\n", what, arg, why);
	_exit(127);
}

HIDDEN __attribute__((noreturn, used)) void fl_launch_main(uint64_t *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		launch_fail("PR_SET_PDEATHSIG", "");
	char b;
	ssize_t n = read(3, &b, 1);
	close(3);
	if (n != 1 || argc < 3)
		_exit(127);
	int envc = 0;
	const char *mode = "", *preload = NULL;
	for (char **e = envp; *e; e++, envc++) {
		if (has_prefix(*e, LAUNCH_ENV))
			mode = *e + strlen(LAUNCH_ENV);
		else if (has_prefix(*e, LAUNCH_PRELOAD))
			preload = *e + strlen(LAUNCH_PRELOAD);
	}
	if (strcmp(mode, "nothp") == 0 &&
	    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
		launch_fail("disabling transparent huge pages", "");
	char *env[envc + 2];
	int k = 0;
	for (char **e = envp; *e; e++)
		if (!has_prefix(*e, LAUNCH_ENV) && !has_prefix(*e, LAUNCH_PRELOAD) &&
		    !(preload && has_prefix(*e, LD_PRELOAD_)))
			env[k++] = *e;
	char ld[preload ? strlen(LD_PRELOAD_) + strlen(preload) + 1 : 1];
	if (preload) {
		strcpy(ld, LD_PRELOAD_);
		strcat(ld, preload);
		env[k++] = ld;
	}
	env[k] = NULL;
	execve(argv[1], argv + 2, env);
	launch_fail("cannot run ", argv[1]);
}

/* The program's interpreter, and its entry: the stack pointer at entry
 * points at argc, then argv and the environment (the x86-64 ABI). */
const char fl_interp[] __attribute__((section(".interp"), used)) =
	"/lib64/ld-linux-x86-64.so.2";

__asm__(".text\n"
	".globl fl_launch_start\n"
	".hidden fl_launch_start\n"
	".type fl_launch_start, @function\n"
	"fl_launch_start:\n"
	"xorl %ebp, %ebp\n"
	"movq %rsp, %rdi\n"
	"andq $-16, %rsp\n"
	"call fl_launch_main\n"
	"hlt\n"
	".size fl_launch_start, .-fl_launch_start\n");
