/*
 * stack.c — the user stack a sampled call carries, and where each
 * thread's stack lies.
 *
 * Unwinding a call's stack reads from its stack pointer up to the root
 * frame (_start's, or a thread's clone3/start_thread frame), so a copy
 * from the stack pointer to the top of the thread's stack reaches the
 * root when the cap allows, and a shallow stack costs only its own bytes.
 * The top is found once per thread (stack_bounds), without allocating:
 * the mapping in /proc/self/maps that holds the stack pointer, and in it
 *  - the main thread's stack (the [stack] mapping, which holds
 *    __libc_stack_end) ends a little above __libc_stack_end, where the
 *    kernel left the stack pointer: above it lie argv, the environment
 *    and the auxiliary vector, which no unwinding reads;
 *  - another thread's stack ends at its thread pointer when that lies in
 *    the same mapping above the stack pointer: the C library puts the
 *    thread's control block and static TLS at the top of the thread's
 *    stack block and starts the stack below them (glibc's
 *    allocate_stack, musl's pthread_create), a stack the program supplied
 *    too; else at the mapping's end. pthread_getattr_np would give the
 *    block's end, above the control block, and allocates (its CPU set).
 * A call whose stack pointer lies outside that stack (a signal handler on
 * its alternate stack, a coroutine's stack, a stack that grew below where
 * it ended at the thread's first call) gets the cap, read with
 * process_vm_readv from this process, which stops at the first page that
 * cannot be read instead of faulting.
 */
#include "stack.h"

extern void *__libc_stack_end EXPORT; /* the C library's */

/* find_mapping sets lo and hi to the bounds of the mapping in
 * /proc/self/maps that holds addr, read with a small buffer on the stack:
 * nothing is allocated (an allocation here would move the program's own
 * heap). It returns 0 when none does. */
static int find_mapping(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
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
			if (addr >= v[0] && addr < v[1]) {
				*lo = v[0];
				*hi = v[1];
				close(fd);
				return 1;
			}
			line = nl + 1;
		}
		have = (size_t)(end - line);
		memmove(buf, line, have);
		if (have == sizeof buf - 1)
			have = 0; /* a line longer than the buffer: skip it */
	}
	close(fd);
	return 0;
}

void stack_bounds(void)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	uintptr_t tp = (uintptr_t)__builtin_thread_pointer();
	uintptr_t base = (uintptr_t)__libc_stack_end;
	ts.stack_lo = ts.stack_hi = ts.copy_hi = 0;
	/* A thread whose first call comes on its signal stack looks for its
	 * own stack where it starts: the main thread's at __libc_stack_end,
	 * another's below its thread pointer. */
	uintptr_t at = sp;
	stack_t ss;
	if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK))
		at = syscall(SYS_gettid) == getpid() ? base : tp - 1;
	uintptr_t lo, hi;
	if (!find_mapping(at, &lo, &hi))
		return;
	ts.stack_lo = lo;
	ts.stack_hi = ts.copy_hi = hi;
	if (base >= lo && base < hi) {
		if (base + 256 < hi)
			ts.copy_hi = base + 256;
	} else if (tp > at && tp <= hi) {
		ts.copy_hi = tp;
	}
}

uint64_t put_stack(struct fl_regs *g, const struct saved *s, uint64_t sp,
		   void *ip, uint32_t room)
{
	g->bx = s->rbx;
	g->bp = s->rbp;
	g->sp = sp;
	g->ip = (uint64_t)ip;
	g->r12 = s->r12;
	g->r13 = s->r13;
	g->r14 = s->r14;
	g->r15 = s->r15;
	uint64_t *n = (uint64_t *)(g + 1);
	uint64_t got = room;
	if (likely(sp >= ts.stack_lo && sp < ts.copy_hi &&
		   ts.copy_hi - sp >= room)) {
		memcpy(n + 1, (void *)sp, room);
	} else {
		int e = errno;
		struct iovec to = {n + 1, room}, from = {(void *)sp, room};
		ssize_t r = process_vm_readv(getpid(), &to, 1, &from, 1, 0);
		got = r > 0 ? (uint64_t)r : 0;
		errno = e;
	}
	*n = got;
	return got;
}
