/*
 * mapcalls.c — the memory-map calls: the C library's wrappers of mmap
 * (and mmap64), munmap, mremap, madvise, posix_madvise, brk and sbrk,
 * interposed like the allocator's entry points. Each calls the next
 * definition and writes one FL_SYS record at its return: the system
 * call's arguments and its result, as the kernel's syscall tracepoints
 * (sys_enter_NAME, sys_exit_NAME) would show them, which the recorder
 * writes them as. An anonymous mmap carries its stack (when stacks are
 * taken): the mapping is a site of its own where no allocation covers
 * it. This needs no tracefs and no privilege.
 *
 * What does not pass through these wrappers is not seen here: the C
 * library's own calls (glibc's malloc maps and trims its heaps through
 * internal aliases) and a program's raw syscall(SYS_mmap, ...). The
 * kernel's MMAP2 records still show the mappings those make.
 */
#include "writer.h"
#include "stack.h"

#include <sys/mman.h>

/* sys_ring returns this thread's ring when memory-map calls are recorded
 * (ring(): the caller calls done()), or NULL. */
static inline struct fl_ring *sys_ring(void)
{
	struct fl_ring *r = ring();
	if (r && unlikely(!ctrl->map_calls)) {
		done();
		return NULL;
	}
	return r;
}

/* sys_record writes a memory-map call of ring r at its return: fn, the
 * system call's arguments a and its result ret; with s (the registers at
 * the wrapper's entry, an anonymous mmap) and stacks taken, the stack
 * too, unwinding from ip (the C library's wrapper). Called between ring()
 * and done(), errno kept by the caller. */
static void sys_record(struct fl_ring *r, int fn, const uint64_t a[5],
		       int64_t ret, const struct saved *s, void *ip)
{
	uint32_t size = sizeof(struct fl_rec) + sizeof(struct fl_sys);
	uint64_t stack = 0, sp = 0;
	if (s && ctrl->stack_size) {
		sp = entry_sp(s);
		stack = stack_room(sp);
		size += stack_bytes(stack);
	} else {
		s = NULL;
	}
	struct fl_rec *rec = begin(r, size);
	if (!rec)
		return;
	rec->kind = FL_SYS;
	rec->fn = (uint8_t)fn;
	rec->flags = s ? FL_F_STACK_BIG : 0;
	struct fl_sys *x = (struct fl_sys *)(rec + 1);
	memcpy(x->args, a, sizeof x->args);
	x->ret = ret;
	if (s) {
		uint64_t got = put_stack((struct fl_regs *)(x + 1), s, sp, ip, stack);
		rec->size -= stack_bytes(stack) - stack_bytes(got);
	}
	commit(r, rec);
}

/* recorded writes the call once it returned, if this thread still
 * records into r, keeping the errno the call left. */
static inline void recorded(struct fl_ring *r, int fn, const uint64_t a[5],
			    int64_t ret, const struct saved *s, void *ip)
{
	int e = errno;
	if (ring() == r) {
		sys_record(r, fn, a, ret, s, ip);
		done();
	}
	errno = e;
}

/* result is a wrapper's failure as the system call returns it. */
static inline int64_t result(int failed, int64_t ok)
{
	return failed ? -(int64_t)errno : ok;
}

/* mmap and mmap64 (one function in the C library on a 64-bit machine):
 * the stubs pass the registers after the six arguments. */
HIDDEN void *fl_mmap(void *addr, size_t len, int prot, int flags, int fd,
		     off_t off, const struct saved *s)
{
	struct fl_ring *r = sys_ring();
	if (r)
		done();
	void *p = likely(real.mmap != NULL) ?
			  real.mmap(addr, len, prot, flags, fd, off) :
			  (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (r) {
		uint64_t a[5] = {(uint64_t)addr, len, (uint64_t)(unsigned)prot,
				 (uint64_t)(unsigned)flags, (uint64_t)(unsigned)fd};
		recorded(r, FL_SYS_MMAP, a, result(p == MAP_FAILED, (int64_t)p),
			 flags & MAP_ANONYMOUS ? s : NULL, (void *)real.mmap);
	}
	return p;
}

EXPORT int munmap(void *addr, size_t len)
{
	struct fl_ring *r = sys_ring();
	if (r)
		done();
	int rc = likely(real.munmap != NULL) ? real.munmap(addr, len) :
					       raw_munmap(addr, len);
	if (r) {
		uint64_t a[5] = {(uint64_t)addr, len};
		recorded(r, FL_SYS_MUNMAP, a, result(rc != 0, 0), NULL, NULL);
	}
	return rc;
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *want = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	struct fl_ring *r = sys_ring();
	if (r)
		done();
	void *p = likely(real.mremap != NULL) ?
			  real.mremap(old, old_len, new_len, flags, want) :
			  (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
	if (r) {
		uint64_t a[5] = {(uint64_t)old, old_len, new_len,
				 (uint64_t)(unsigned)flags, (uint64_t)want};
		recorded(r, FL_SYS_MREMAP, a, result(p == MAP_FAILED, (int64_t)p),
			 NULL, NULL);
	}
	return p;
}

EXPORT int madvise(void *addr, size_t len, int advice)
{
	struct fl_ring *r = sys_ring();
	if (r)
		done();
	int rc = likely(real.madvise != NULL) ? real.madvise(addr, len, advice) :
						raw_madvise(addr, len, advice);
	if (r) {
		uint64_t a[5] = {(uint64_t)addr, len, (uint64_t)(unsigned)advice};
		recorded(r, FL_SYS_MADVISE, a, result(rc != 0, 0), NULL, NULL);
	}
	return rc;
}

/* posix_madvise returns an error number, not -1. glibc's makes no system
 * call for POSIX_MADV_DONTNEED (it must not discard data): only the
 * others are recorded, as the madvise they make. */
EXPORT int posix_madvise(void *addr, size_t len, int advice)
{
	struct fl_ring *r = advice != POSIX_MADV_DONTNEED ? sys_ring() : NULL;
	if (r)
		done();
	int rc = likely(real.posix_madvise != NULL) ?
			 real.posix_madvise(addr, len, advice) :
			 (raw_madvise(addr, len, advice) ? errno : 0);
	if (r) {
		uint64_t a[5] = {(uint64_t)addr, len, (uint64_t)(unsigned)advice};
		recorded(r, FL_SYS_MADVISE, a, rc ? -(int64_t)rc : 0, NULL, NULL);
	}
	return rc;
}

/* brk and sbrk: recorded as the brk system call that moved the break to
 * where it now is (the kernel returns the new break). A failed call moved
 * nothing and is not recorded. */
EXPORT int brk(void *addr)
{
	struct fl_ring *r = sys_ring();
	if (r)
		done();
	int rc = likely(real.brk != NULL) ? real.brk(addr) :
					    (syscall(SYS_brk, addr) == (long)addr ? 0 : -1);
	if (r && rc == 0) {
		uint64_t a[5] = {(uint64_t)addr};
		recorded(r, FL_SYS_BRK, a, (int64_t)addr, NULL, NULL);
	}
	return rc;
}

EXPORT void *sbrk(intptr_t inc)
{
	struct fl_ring *r = sys_ring();
	if (r)
		done();
	void *old;
	if (likely(real.sbrk != NULL)) {
		old = real.sbrk(inc);
	} else {
		old = (void *)syscall(SYS_brk, 0);
		if (inc && syscall(SYS_brk, (char *)old + inc) != (long)((char *)old + inc)) {
			errno = ENOMEM;
			old = (void *)-1;
		}
	}
	if (r && old != (void *)-1) {
		uint64_t now = (uint64_t)old + (uint64_t)inc;
		uint64_t a[5] = {now};
		recorded(r, FL_SYS_BRK, a, (int64_t)now, NULL, NULL);
	}
	return old;
}
