/*
 * ring.c — the ring protocol: attaching the recorder's region, claiming a
 * ring for a thread (finding its stack: stack.c), and waiting for room (ring.h has
 * the fast path).
 */
#include "ring.h"
#include "stack.h"

__thread struct tstate ts __attribute__((tls_model("initial-exec")));
struct fl_ctrl *ctrl;
int state;
uint32_t gen = 1;
static uint8_t *region;
static size_t region_bytes;

long futex(uint32_t *w, int op, uint32_t val, const struct timespec *t)
{
	return syscall(SYS_futex, w, op, val, t, NULL, 0);
}

static void after_fork_child(void)
{
	/* The child's threads (only the forking one) claim new rings. */
	__atomic_add_fetch(&gen, 1, __ATOMIC_RELAXED);
}

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
	void *m = raw_mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_NORESERVE, f);
	close(f);
	if (m == MAP_FAILED)
		return;
	struct fl_ctrl *c = m;
	/* Populated now, the control block never faults while recording. */
	raw_madvise(m, FL_CTRL_BYTES, MADV_POPULATE_WRITE);
	size_t need = FL_CTRL_BYTES +
		      (size_t)c->nslots * (FL_RING_HDR + (size_t)c->ring_bytes);
	if (c->magic != FL_MAGIC || c->version != FL_VERSION ||
	    c->nslots == 0 || c->nslots > FL_MAX_SLOTS ||
	    c->ring_bytes < (256u << 10) ||
	    (c->ring_bytes & (c->ring_bytes - 1)) != 0 ||
	    c->words > FL_MAX_WORDS || c->stack_size > FL_MAX_STACK ||
	    need > (size_t)st.st_size) {
		raw_munmap(m, (size_t)st.st_size);
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


/* init runs once, at the first allocator call of the process (which may
 * come from the dynamic linker before any constructor). */
void init(void)
{
	int s = 0;
	if (__atomic_compare_exchange_n(&state, &s, 1, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		ts.depth++;
		ts.own++;
		resolve();
		find_own_code();
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

/* A process that loads the shim attaches at once, allocator call or not:
 * one that maps the shim but never the rings could not reach them (its
 * privileges dropped before the exec), and the recorder says so. */
__attribute__((constructor)) static void attach_at_load(void)
{
	init();
}


static inline struct fl_ring *ring_at(uint32_t i)
{
	return (struct fl_ring *)((uint8_t *)ctrl + FL_CTRL_BYTES +
				  (size_t)i * (FL_RING_HDR + ctrl->ring_bytes));
}


/* populate maps n bytes at p with MADV_POPULATE_WRITE (Linux 5.14; before
 * that the pages fault in as they are written), keeping errno. */
static void populate(void *p, size_t n)
{
	int e = errno;
	raw_madvise(p, n, MADV_POPULATE_WRITE);
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

/* ring_claim claims a ring for this thread in generation g of the
 * process (ring), keeping errno (stack_bounds reads /proc/self/maps). */
void __attribute__((noinline)) ring_claim(uint32_t g)
{
	int e = errno;
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
	errno = e;
}

/* wait_room blocks until the ring has room for `need` more bytes at head;
 * it returns 0 when recording must stop (recorder gone or stopped). It
 * keeps errno, which a futex call that times out or is interrupted sets:
 * the allocator call around the wait (a free, or an entry before the
 * allocator runs) leaves the program's. */
int __attribute__((noinline)) wait_room(struct fl_ring *r, uint64_t need)
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
		int e = errno;
		futex(&ctrl->wake, FUTEX_WAKE, 1, NULL);
		struct timespec ten_ms = {0, 10 * 1000 * 1000};
		futex(&r->tail_seq, FUTEX_WAIT, seq, &ten_ms);
		errno = e;
		__atomic_store_n(&r->waiting, 0, __ATOMIC_RELAXED);
	}
}


/* populate_more maps the ring's data up to the step that holds byte
 * `need` (a head, before the ring first wraps). */
void __attribute__((noinline)) populate_more(struct fl_ring *r, uint64_t need)
{
	uint32_t rb = ctrl->ring_bytes;
	uint64_t end = (need + FL_POP_STEP) & ~(uint64_t)(FL_POP_STEP - 1);
	if (end > rb)
		end = rb;
	populate((uint8_t *)r + FL_RING_HDR + ts.pop_end, end - ts.pop_end);
	ts.pop_end = end == rb ? ~(uint64_t)0 : end;
}

