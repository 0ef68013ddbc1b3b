/*
 * resolve.c — finding the allocator the program would have called: the
 * next definition of each entry point (RTLD_NEXT), operator new's where
 * dlopen hid it, and the program's own code.
 */
#include "shim.h"

struct real real;
void *next_scope = RTLD_NEXT;
int std_new;
int glibc;
struct code_range own[MAX_OWN];
int nown;

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
void resolve_new(void)
{
	void *h = next_scope;
	void *nw = dlsym(next_scope, "_Znwm");
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

void resolve(void)
{
	real.malloc = dlsym(next_scope, "malloc");
	real.calloc = dlsym(next_scope, "calloc");
	real.realloc = dlsym(next_scope, "realloc");
	real.reallocarray = dlsym(next_scope, "reallocarray");
	real.free = dlsym(next_scope, "free");
	real.memalign = dlsym(next_scope, "memalign");
	real.aligned_alloc = dlsym(next_scope, "aligned_alloc");
	real.posix_memalign = dlsym(next_scope, "posix_memalign");
	real.valloc = dlsym(next_scope, "valloc");
	real.pvalloc = dlsym(next_scope, "pvalloc");
	real.mmap = dlsym(next_scope, "mmap");
	real.munmap = dlsym(next_scope, "munmap");
	real.mremap = dlsym(next_scope, "mremap");
	real.madvise = dlsym(next_scope, "madvise");
	real.posix_madvise = dlsym(next_scope, "posix_madvise");
	real.brk = dlsym(next_scope, "brk");
	real.sbrk = dlsym(next_scope, "sbrk");
	/* Chunk headers are glibc's: another allocator (preloaded after the
	 * shim, say) keeps no header there, and reading the word before its
	 * block could fault a page the program never touches. */
	const char *base = real.malloc ? object_base((void *)real.malloc) : NULL;
	glibc = base && (strncmp(base, "libc.so.6", 9) == 0 || strncmp(base, "libc-", 5) == 0);
#ifdef FL_FAMILY
	resolve_family();
#else
	resolve_new();
#endif
}


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

/* find_own_code notes the program's own executable segments (own). */
void find_own_code(void) { dl_iterate_phdr(find_own, NULL); }
