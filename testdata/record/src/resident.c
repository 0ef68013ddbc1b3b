/* resident.c: buffers whose residency the program reports itself, for
 * record's page-table snapshots to be checked against (the live test
 * TestRecordLiveResident).
 *
 *   resident MODE OUT
 *
 * Four buffers, each malloc'd from a function of its own (so each is a
 * site of its own): a 64 MiB, b 32 MiB, c 16 MiB fully written, d 8 MiB
 * half written. MODE:
 *   nothp     PR_SET_THP_DISABLE first: every page by a fault of its own;
 *   advise    a and c advised MADV_HUGEPAGE;
 *   always    the whole heap advised as THP mode "always" treats it:
 *             re-executed with GLIBC_TUNABLES=glibc.malloc.hugetlb=1, so
 *             malloc advises every block it maps;
 *   collapse  d written every other page, then MADV_COLLAPSE over it;
 *   fork      a child writes the first half of a, reports, exits.
 * At its peak (everything written) and before it exits (a freed) it
 * writes to OUT, per buffer, its size, the bytes of it in resident pages
 * (mincore) and in transparent huge pages (kpageflags), and smaps_rollup's
 * Anonymous and AnonHugePages; the fork child writes a's Private_Dirty.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1UL << 20)
#define HUGE (2 * MiB)
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

static FILE *out;

/* bytes of [p, p+n) in resident pages, by mincore */
static size_t resident(char *p, size_t n) {
	uintptr_t s = (uintptr_t)p & ~4095UL, e = ((uintptr_t)p + n + 4095) & ~4095UL;
	size_t np = (e - s) / 4096, b = 0;
	unsigned char *v = malloc(np);
	if (mincore((void *)s, e - s, v) != 0) {
		perror("mincore");
		exit(1);
	}
	for (size_t i = 0; i < np; i++) {
		if (!(v[i] & 1))
			continue;
		uintptr_t ps = s + i * 4096, pe = ps + 4096;
		uintptr_t lo = ps > (uintptr_t)p ? ps : (uintptr_t)p;
		uintptr_t hi = pe < (uintptr_t)p + n ? pe : (uintptr_t)p + n;
		b += hi - lo;
	}
	free(v);
	return b;
}

/* a smaps field summed over the mappings that overlap [p, p+n), bytes */
static long smaps(char *p, size_t n, const char *field) {
	FILE *f = fopen("/proc/self/smaps", "r");
	char l[512];
	int in = 0;
	long v = 0;
	while (fgets(l, sizeof l, f)) {
		unsigned long a, b;
		char *dash = strchr(l, '-'), *sp = strchr(l, ' ');
		if (dash && sp && dash < sp && sscanf(l, "%lx-%lx", &a, &b) == 2) {
			in = (uintptr_t)p < b && (uintptr_t)p + n > a;
			continue;
		}
		if (in && strncmp(l, field, strlen(field)) == 0)
			v += atol(l + strlen(field)) * 1024;
	}
	fclose(f);
	return v;
}

/* bytes of [p, p+n) that transparent huge pages hold, by each page's
 * frame (/proc/self/pagemap) and its flags (/proc/kpageflags, KPF_THP:
 * bit 22); both need root for the frame numbers, -1 without */
static long thp_bytes(char *p, size_t n) {
	FILE *pm = fopen("/proc/self/pagemap", "r"), *kf = fopen("/proc/kpageflags", "r");
	long b = -1;
	if (!pm || !kf)
		goto out;
	b = 0;
	for (uintptr_t a = (uintptr_t)p & ~4095UL; a < (uintptr_t)p + n; a += 4096) {
		uint64_t e = 0, fl = 0;
		if (fseek(pm, a / 4096 * 8, SEEK_SET) != 0 || fread(&e, 8, 1, pm) != 1)
			return -1;
		if (!(e >> 63) || !(e & ((1ULL << 55) - 1)))
			continue;
		if (fseek(kf, (e & ((1ULL << 55) - 1)) * 8, SEEK_SET) != 0 || fread(&fl, 8, 1, kf) != 1)
			continue;
		if (fl >> 22 & 1) {
			uintptr_t lo = a > (uintptr_t)p ? a : (uintptr_t)p, hi = a + 4096 < (uintptr_t)p + n ? a + 4096 : (uintptr_t)p + n;
			b += hi - lo;
		}
	}
out:
	if (pm)
		fclose(pm);
	if (kf)
		fclose(kf);
	return b;
}

static long rollup(const char *field) {
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char l[512];
	long v = -1;
	while (fgets(l, sizeof l, f))
		if (strncmp(l, field, strlen(field)) == 0)
			v = atol(l + strlen(field)) * 1024;
	fclose(f);
	return v;
}

/* the part of [p, p+n) that whole huge pages can map */
static void aligned(char *p, size_t n, char **s, size_t *len) {
	uintptr_t lo = ((uintptr_t)p + HUGE - 1) & ~(HUGE - 1), hi = ((uintptr_t)p + n) & ~(HUGE - 1);
	*s = (char *)lo;
	*len = hi > lo ? hi - lo : 0;
}

/* Not a tail call: each function stays the caller of its malloc. */
#define ALLOC(name)                                    \
	__attribute__((noinline)) char *name(size_t n) { \
		char *p = malloc(n);                       \
		__asm__ volatile("" : "+r"(p));            \
		return p;                                  \
	}
ALLOC(alloc_a)
ALLOC(alloc_b)
ALLOC(alloc_c)
ALLOC(alloc_d)

static void report(const char *when, const char *names, char **b, size_t *sz, int from) {
	fprintf(out, "%s rollup_anon %ld anonhuge %ld\n", when, rollup("Anonymous:"), rollup("AnonHugePages:"));
	for (int i = from; i < 4; i++)
		fprintf(out, "%s buf %c size %zu resident %zu thp %ld\n", when, names[i], sz[i], resident(b[i], sz[i]),
			thp_bytes(b[i], sz[i]));
	fflush(out);
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: resident nothp|advise|always|collapse|fork OUT\n");
		return 2;
	}
	const char *mode = argv[1];
	if (strcmp(mode, "always") == 0 && !getenv("GLIBC_TUNABLES")) {
		setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1);
		execv("/proc/self/exe", argv);
		perror("execv");
		return 1;
	}
	if (strcmp(mode, "nothp") == 0 && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
		perror("PR_SET_THP_DISABLE");
		return 1;
	}
	out = fopen(argv[2], "w");
	if (!out) {
		perror(argv[2]);
		return 1;
	}
	const char names[] = "abcd";
	size_t sz[4] = {64 * MiB, 32 * MiB, 16 * MiB, 8 * MiB};
	char *b[4] = {alloc_a(sz[0]), alloc_b(sz[1]), alloc_c(sz[2]), alloc_d(sz[3])};
	for (int i = 0; i < 4; i++) {
		if (strcmp(mode, "advise") == 0 && (i == 0 || i == 2)) {
			char *s;
			size_t n;
			aligned(b[i], sz[i], &s, &n);
			madvise(s, n, MADV_HUGEPAGE);
		}
		size_t step = 4096, end = sz[i];
		if (i == 3 && strcmp(mode, "collapse") == 0)
			step = 8192; /* every other page */
		else if (i == 3)
			end = sz[i] / 2;
		for (size_t j = 0; j < end; j += step)
			b[i][j] = 1;
	}
	if (strcmp(mode, "collapse") == 0) {
		char *s;
		size_t n;
		aligned(b[3], sz[3], &s, &n);
		if (madvise(s, n, MADV_COLLAPSE) != 0)
			perror("MADV_COLLAPSE");
	}
	if (strcmp(mode, "fork") == 0) {
		pid_t c = fork();
		if (c == 0) {
			for (size_t j = 0; j < sz[0] / 2; j += 4096)
				b[0][j] = 2;
			fprintf(out, "child pid %d private_dirty %ld\n", getpid(), smaps(b[0], sz[0], "Private_Dirty:"));
			fflush(out);
			_exit(0);
		}
		waitpid(c, 0, 0);
	}
	report("peak", names, b, sz, 0);
	free(b[0]);
	report("exit", names, b, sz, 1);
	return 0;
}
