/*
 * attach.c — recording a program that is already running. faultline
 * record -p makes one thread of the program call dlopen on this object
 * (loaded RTLD_LOCAL: its symbols interpose nothing), then, through the
 * same thread, faultline_attach_prepare and faultline_attach. From then on
 * the object's exported entry points (malloc, free, operator new, the
 * memory-map calls: every function it exports but these two) are what
 * the program's loaded objects call: attach rewrites their GOT entries
 * (the R_X86_64_JUMP_SLOT and R_X86_64_GLOB_DAT relocations of those
 * names), remembering each entry's value, and the entry points call the
 * allocator the program's global scope defines (resolve, next_scope).
 *
 * A thread of its own (the watcher, all signals blocked) holds the read
 * end of a pipe whose only write end record holds: when record ends,
 * however it ends, the pipe reports EOF and the watcher puts every
 * rewritten entry back, then leaves the shim dormant: never unloaded (a
 * thread may still be in an entry point, or hold its address), calls
 * through it forwarded to the allocator unrecorded. Objects loaded while
 * attached are rewritten by the watcher within watch_ms of their load
 * (it polls the loader's count of loads). All GOT work runs inside
 * dl_iterate_phdr's callback, under the loader's lock, so no object is
 * unloaded under it.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <poll.h> /* before shim.h, whose declarations are hidden */
#include <sys/select.h>

#include "ring.h"

/* The shim's entry points by name: the exported functions of this
 * object, found in its own dynamic symbol table. */
#define MAX_NAMES 128
static struct {
	const char *name;
	uint64_t addr;
} names[MAX_NAMES];
static int nnames;
static uint64_t self_base;

/* A rewritten GOT entry and the value it had. */
struct redirect {
	uint64_t slot, orig, ours;
};
#define MAX_REDIRECTS 8192
static struct redirect redirects[MAX_REDIRECTS];
static int nredirects;
static uint64_t dropped; /* entries not rewritten: the table was full */

static int attached;       /* between faultline_attach and the watcher's restore */
static int detaching;      /* the watcher is restoring, or about to */
static int pipe_r = -1;    /* the watcher's end of record's pipe */
static uint64_t seen_adds; /* the loader's count of loads at the last scan */
static size_t mapped_bytes;
static void *mapped; /* the region, or the placeholder left in its place */

/* What ctrl points at once detached: recording off, and a ring size for
 * a thread still between ring() and done() when the region was replaced. */
static struct fl_ctrl dormant = {.detached = 1};

static const int watch_ms = 50;

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

static uint64_t lookup(const char *s)
{
	for (uint64_t i = fnv(s) & (MAX_NAMES - 1), n = 0; n < MAX_NAMES;
	     i = (i + 1) & (MAX_NAMES - 1), n++) {
		if (!names[i].name)
			return 0;
		if (strcmp(names[i].name, s) == 0)
			return names[i].addr;
	}
	return 0;
}

static void add_name(const char *s, uint64_t addr)
{
	if (nnames >= MAX_NAMES / 2)
		return;
	uint64_t i = fnv(s) & (MAX_NAMES - 1);
	while (names[i].name)
		i = (i + 1) & (MAX_NAMES - 1);
	names[i].name = s;
	names[i].addr = addr;
	nnames++;
}

/* An object's dynamic section, its addresses made absolute: ld.so
 * relocates most entries in place, the vDSO's it leaves as they are. */
struct dyn {
	const ElfW(Sym) *sym;
	const char *str;
	const ElfW(Rela) *rel[2];
	size_t relsz[2];
	const uint32_t *gnu_hash;
};

static uint64_t absolute(uint64_t v, uint64_t base)
{
	return v < base ? v + base : v;
}

static int read_dyn(struct dl_phdr_info *info, struct dyn *d)
{
	memset(d, 0, sizeof *d);
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (!dyn)
		return 0;
	uint64_t b = info->dlpi_addr;
	int rela_plt = 1;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		uint64_t v = dyn->d_un.d_ptr;
		switch (dyn->d_tag) {
		case DT_SYMTAB: d->sym = (const void *)absolute(v, b); break;
		case DT_STRTAB: d->str = (const void *)absolute(v, b); break;
		case DT_RELA: d->rel[0] = (const void *)absolute(v, b); break;
		case DT_RELASZ: d->relsz[0] = v; break;
		case DT_JMPREL: d->rel[1] = (const void *)absolute(v, b); break;
		case DT_PLTRELSZ: d->relsz[1] = v; break;
		case DT_PLTREL: rela_plt = v == DT_RELA; break;
		case DT_GNU_HASH: d->gnu_hash = (const void *)absolute(v, b); break;
		}
	}
	if (!rela_plt)
		d->rel[1] = NULL;
	return d->sym && d->str;
}

/* relro returns the pages the loader made read-only after relocating
 * (PT_GNU_RELRO, rounded down at both ends as the loader rounds it). */
static void relro(struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi)
{
	*lo = *hi = 0;
	uint64_t pg = (uint64_t)getpagesize();
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_GNU_RELRO)
			continue;
		*lo = (info->dlpi_addr + p->p_vaddr) & ~(pg - 1);
		*hi = (info->dlpi_addr + p->p_vaddr + p->p_memsz) & ~(pg - 1);
	}
}

/* store writes v into the GOT entry at slot: a page of the read-only
 * range is made writable for the store and read-only again. It reports
 * whether the entry was written. */
static int store(uint64_t slot, uint64_t v, uint64_t ro_lo, uint64_t ro_hi)
{
	uint64_t pg = (uint64_t)getpagesize();
	void *page = (void *)(slot & ~(pg - 1));
	int ro = slot >= ro_lo && slot < ro_hi;
	if (ro && mprotect(page, pg, PROT_READ | PROT_WRITE) != 0)
		return 0;
	__atomic_store_n((uint64_t *)slot, v, __ATOMIC_RELEASE);
	if (ro)
		mprotect(page, pg, PROT_READ);
	return 1;
}

static struct redirect *find_redirect(uint64_t slot)
{
	for (int i = 0; i < nredirects; i++)
		if (redirects[i].slot == slot)
			return &redirects[i];
	return NULL;
}

/* redirect_object rewrites the GOT entries of one loaded object that
 * name the shim's entry points. */
static int redirect_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (info->dlpi_addr == self_base && self_base != 0)
		return 0;
	struct dyn d;
	if (!read_dyn(info, &d))
		return 0;
	uint64_t lo, hi;
	relro(info, &lo, &hi);
	for (int k = 0; k < 2; k++) {
		if (!d.rel[k])
			continue;
		size_t n = d.relsz[k] / sizeof(ElfW(Rela));
		for (size_t i = 0; i < n; i++) {
			const ElfW(Rela) *r = &d.rel[k][i];
			uint32_t type = ELF64_R_TYPE(r->r_info);
			if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
				continue;
			uint32_t si = ELF64_R_SYM(r->r_info);
			if (!si)
				continue;
			uint64_t ours = lookup(d.str + d.sym[si].st_name);
			if (!ours)
				continue;
			uint64_t slot = info->dlpi_addr + r->r_offset;
			uint64_t cur = __atomic_load_n((uint64_t *)slot, __ATOMIC_ACQUIRE);
			if (cur == ours)
				continue;
			struct redirect *e = find_redirect(slot);
			if (!e && nredirects == MAX_REDIRECTS) {
				dropped++;
				continue;
			}
			if (!store(slot, ours, lo, hi))
				continue;
			if (!e)
				e = &redirects[nredirects++];
			*e = (struct redirect){slot, cur, ours};
		}
	}
	return 0;
}

/* restore_object puts back the entries of one loaded object (those of
 * objects unloaded since are gone with them). An entry that no longer
 * holds the shim's address (the program wrote it) is left as it is. */
static int restore_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	uint64_t lo, hi;
	relro(info, &lo, &hi);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD || !(p->p_flags & PF_W))
			continue;
		uint64_t s = info->dlpi_addr + p->p_vaddr, e = s + p->p_memsz;
		for (int k = 0; k < nredirects; k++) {
			struct redirect *r = &redirects[k];
			if (r->slot < s || r->slot >= e || r->slot + 8 > e)
				continue;
			if (__atomic_load_n((uint64_t *)r->slot, __ATOMIC_ACQUIRE) == r->ours)
				store(r->slot, r->orig, lo, hi);
			r->slot = 0;
		}
	}
	return 0;
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *data)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs))
		*(uint64_t *)data = info->dlpi_adds;
	return 1;
}

static uint64_t loads(void)
{
	uint64_t n = 0;
	dl_iterate_phdr(count_adds, &n);
	return n;
}

/* The shim's own exported functions, from its dynamic symbol table (its
 * size from the GNU hash table, the only one build.sh links in). */
static int own_names(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (info->dlpi_addr != self_base)
		return 0;
	struct dyn d;
	if (!read_dyn(info, &d) || !d.gnu_hash)
		return 1;
	const uint32_t *h = d.gnu_hash;
	uint32_t nbuckets = h[0], symoff = h[1], bloom = h[2];
	const uint32_t *buckets = h + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t nsyms = symoff;
	for (uint32_t b = 0; b < nbuckets; b++)
		if (buckets[b] >= nsyms)
			nsyms = buckets[b] + 1;
	if (nsyms > symoff)
		while (!(chain[nsyms - 1 - symoff] & 1))
			nsyms++;
	for (uint32_t i = 1; i < nsyms; i++) {
		const ElfW(Sym) *s = &d.sym[i];
		const char *n = d.str + s->st_name;
		if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC ||
		    strncmp(n, "faultline_", 10) == 0)
			continue;
		add_name(n, info->dlpi_addr + s->st_value);
	}
	return 1;
}

static void after_fork_child(void)
{
	/* The child is not recorded: it has no watcher to restore its
	 * entries, so its calls pass through the dormant shim. It lets go
	 * of the region (its only thread is in fork, not in the shim) and
	 * of the watcher's pipe. */
	if (__atomic_load_n(&attached, __ATOMIC_ACQUIRE)) {
		dormant.ring_bytes = ctrl->ring_bytes;
		__atomic_store_n(&ctrl, &dormant, __ATOMIC_RELEASE);
		__atomic_store_n(&attached, 0, __ATOMIC_RELEASE);
		raw_mmap(mapped, mapped_bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1);
	}
	if (pipe_r >= 0) {
		close(pipe_r);
		pipe_r = -1;
	}
}

/* detach puts every entry back and leaves the shim dormant. The region
 * is replaced by untouched anonymous memory of its size, not unmapped: a
 * thread preempted inside an entry point keeps writing where it was. */
static void detach(void)
{
	struct fl_ctrl *c = ctrl;
	__atomic_store_n(&c->detached, 1, __ATOMIC_SEQ_CST);
	dl_iterate_phdr(restore_object, NULL);
	nredirects = 0;
	dormant.ring_bytes = c->ring_bytes;
	struct timespec grace = {0, 20 * 1000 * 1000};
	nanosleep(&grace, NULL);
	__atomic_store_n(&ctrl, &dormant, __ATOMIC_RELEASE);
	nanosleep(&grace, NULL);
	raw_mmap(mapped, mapped_bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1);
	__atomic_store_n(&attached, 0, __ATOMIC_RELEASE);
}

static void *watch(void *arg)
{
	(void)arg;
	ts.depth++; /* its own calls are not the program's */
	ts.own++;
	prctl(PR_SET_NAME, "faultline-watch", 0, 0, 0);
	for (;;) {
		struct pollfd p = {pipe_r, POLLIN, 0};
		int n = poll(&p, 1, watch_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 0) {
			/* EOF, or an error: record is gone */
			__atomic_store_n(&detaching, 1, __ATOMIC_RELEASE);
			break;
		}
		uint64_t a = loads();
		if (a != seen_adds) {
			seen_adds = a;
			dl_iterate_phdr(redirect_object, NULL);
		}
	}
	detach();
	close(pipe_r);
	pipe_r = -1;
	__atomic_store_n(&detaching, 0, __ATOMIC_RELEASE);
	return NULL;
}

static int where_am_i;

/* pause_us sleeps us microseconds with select: an interrupted select is
 * restarted without the thread's restart block (nanosleep and poll would
 * leave theirs in it), which the injection may still need for a system
 * call of the program it broke off. */
static void pause_us(long us)
{
	struct timeval tv = {us / 1000000, us % 1000000};
	select(0, NULL, NULL, NULL, &tv);
}

/* faultline_attach_prepare makes the region's memfd and the pipe whose
 * write end record takes (pidfd_getfd) and whose read end the watcher
 * keeps: it returns the memfd | the write end << 32, or -errno. */
EXPORT long faultline_attach_prepare(void)
{
	/* A detach under way (the watcher saw the last record end) is
	 * waited for; a record still attached is not. */
	for (int i = 0; i < 50 && __atomic_load_n(&detaching, __ATOMIC_ACQUIRE); i++)
		pause_us(10000);
	if (__atomic_load_n(&attached, __ATOMIC_ACQUIRE) || pipe_r >= 0)
		return -EBUSY;
	int fd = (int)syscall(SYS_memfd_create, "faultline-rings", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	pipe_r = p[0];
	return (long)fd | (long)p[1] << 32;
}

/* map_region maps the region record set up in memfd fd, over the
 * placeholder a previous attach left where it fits. */
static struct fl_ctrl *map_region(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size < FL_CTRL_BYTES)
		return NULL;
	size_t n = (size_t)st.st_size;
	void *at = mapped && n <= mapped_bytes ? mapped : NULL;
	void *m = raw_mmap(at, n, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_NORESERVE | (at ? MAP_FIXED : 0), fd);
	if (m == MAP_FAILED)
		return NULL;
	struct fl_ctrl *c = m;
	size_t need = FL_CTRL_BYTES +
		      (size_t)c->nslots * (FL_RING_HDR + (size_t)c->ring_bytes);
	if (c->magic != FL_MAGIC || c->version != FL_VERSION ||
	    c->nslots == 0 || c->nslots > FL_MAX_SLOTS ||
	    c->ring_bytes < (256u << 10) ||
	    (c->ring_bytes & (c->ring_bytes - 1)) != 0 ||
	    c->words > FL_MAX_WORDS || c->stack_size > FL_MAX_STACK || need > n) {
		if (at)
			raw_mmap(at, n, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1);
		else
			raw_munmap(m, n);
		return NULL;
	}
	if (!at) {
		mapped = m;
		mapped_bytes = n;
	}
	raw_madvise(m, FL_CTRL_BYTES, MADV_POPULATE_WRITE);
	return c;
}

/* faultline_attach starts recording into the region of memfd fd (closed
 * here, as is wfd, the target's copy of the pipe's write end): it
 * returns 0, or a negative errno (nothing redirected then). */
EXPORT long faultline_attach(int fd, int wfd)
{
	close(wfd);
	if (__atomic_load_n(&attached, __ATOMIC_ACQUIRE) || pipe_r < 0) {
		close(fd);
		return -EBUSY;
	}
	ts.depth++;
	ts.own++;
	long rc = 0;
	struct fl_ctrl *c = map_region(fd);
	close(fd);
	if (!c) {
		rc = -EINVAL;
		goto out;
	}
	Dl_info self;
	if (!dladdr(&where_am_i, &self)) {
		rc = -ENOENT;
		goto out;
	}
	self_base = (uint64_t)self.dli_fbase;
	if (!nnames)
		dl_iterate_phdr(own_names, NULL);
	/* The allocator the program's own objects bind to: its global
	 * scope, in which this object (RTLD_LOCAL) is not. */
	next_scope = RTLD_DEFAULT;
	resolve();
	if (!real.malloc || !real.free) {
		rc = -ENOENT;
		goto out;
	}
	int tsc_mode = 0;
	if (c->tsc && prctl(PR_GET_TSC, &tsc_mode, 0, 0, 0) == 0 &&
	    tsc_mode == PR_TSC_ENABLE)
		use_tsc = 1;
	else
		tsc_off();
	static int forked_once;
	if (!forked_once++)
		pthread_atfork(NULL, NULL, after_fork_child);
	/* Every thread claims a ring of this region at its next call. */
	__atomic_add_fetch(&gen, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&ctrl, c, __ATOMIC_RELEASE);
	__atomic_store_n(&attached, 1, __ATOMIC_RELEASE);
	seen_adds = loads();
	dl_iterate_phdr(redirect_object, NULL);
	/* The watcher starts with every signal blocked: the program's
	 * signals go to its own threads, as before. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 << 10);
	pthread_t t;
	int e = pthread_create(&t, &at, watch, NULL);
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e != 0) {
		detach();
		rc = -e;
	}
out:
	if (rc < 0 && pipe_r >= 0) {
		close(pipe_r);
		pipe_r = -1;
	}
	ts.own--;
	ts.depth--;
	return rc;
}

/* What record and faultline_attach_inject share: the argument of the
 * injected call, in the page record mapped into the program (record
 * writes tracer and go; the offsets are attach.go's). */
struct fl_inject {
	uint64_t page, page_len; /* the injection's page */
	int64_t tracer;          /* record's pid, or 0: not in our namespace */
	uint32_t state;          /* 1: prepared is set */
	uint32_t go;             /* record: 1 attach, 2 give up */
	int64_t prepared;        /* faultline_attach_prepare's result */
};

/* The previous injection's page, unmapped by the next injection that
 * runs alone (its thread left the page long ago), and the injected
 * threads in faultline_attach_inject now: a second record attaching
 * while the first one's thread still waits there leaves both pages. */
static uint64_t prev_page, prev_page_len;
static int in_flight;

/* tracer_gone waits up to 1 ms, for record's exit when its pidfd is
 * known, and reports that exit. */
static int tracer_gone(int pidfd)
{
	if (pidfd < 0 || pidfd >= FD_SETSIZE) {
		pause_us(1000);
		return 0;
	}
	fd_set r;
	FD_ZERO(&r);
	FD_SET(pidfd, &r);
	struct timeval tv = {0, 1000};
	return select(pidfd + 1, &r, NULL, NULL, &tv) > 0;
}

/* inject_attach makes the memfd and the pipe (faultline_attach_prepare)
 * and waits, at most 5 s, for record to take them and say go; then it
 * attaches. Record gone first (seen at once through a pidfd of tracer,
 * record's pid when it is in this process's PID namespace, else at the
 * 5 s), or giving up, it closes them and returns -ECANCELED. */
static long inject_attach(struct fl_inject *in)
{
	long r = faultline_attach_prepare();
	in->prepared = r;
	__atomic_store_n(&in->state, 1, __ATOMIC_RELEASE);
	if (r < 0)
		return r;
	int memfd = (int)(r & 0xffffffff), wfd = (int)(r >> 32);
	int pidfd = in->tracer > 0 ? (int)syscall(SYS_pidfd_open, (pid_t)in->tracer, 0) : -1;
	uint32_t go = 0;
	for (int i = 0; i < 5000; i++) {
		go = __atomic_load_n(&in->go, __ATOMIC_ACQUIRE);
		if (go || tracer_gone(pidfd))
			break;
	}
	if (pidfd >= 0)
		close(pidfd);
	if (go != 1) {
		close(memfd);
		close(wfd);
		close(pipe_r);
		pipe_r = -1;
		return -ECANCELED;
	}
	return faultline_attach(memfd, wfd);
}

/* faultline_attach_inject is what the injected thread calls: it unmaps
 * the previous injection's page and attaches (inject_attach). */
EXPORT long faultline_attach_inject(struct fl_inject *in)
{
	if (__atomic_add_fetch(&in_flight, 1, __ATOMIC_ACQ_REL) == 1) {
		if (prev_page && prev_page != in->page)
			raw_munmap((void *)prev_page, prev_page_len);
		prev_page = in->page;
		prev_page_len = in->page_len;
	}
	long r = inject_attach(in);
	__atomic_sub_fetch(&in_flight, 1, __ATOMIC_ACQ_REL);
	return r;
}

/* faultline_attach_state reports, for record's check after an attach:
 * the entries rewritten (low 32 bits) and those the table had no room for
 * (high 32 bits). */
EXPORT long faultline_attach_state(void)
{
	return (long)nredirects | (long)(dropped & 0xffffffff) << 32;
}
