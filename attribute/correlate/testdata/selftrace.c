// selftrace: a program that logs its own memory accesses the way Intel Pin's
// pinatrace tool does, with known truth for faultline correlate's tests.
//
// Every access the workload makes goes through one of a few access
// functions whose load or store instruction carries a global label
// (site_read, site_write, site_write2), so the logged ip is exactly the
// address of the instruction that touches memory, as Pin logs it. Before
// the instruction runs (Pin's IPOINT_BEFORE), the access is logged:
//
//   SECONDS.MICROS: TID: 0xIP: R|W 0xADDR
//
// with CLOCK_MONOTONIC time; -f selects fewer columns (see usage). The log is
// buffered in memory that the workload never touches through the access
// functions, so the log's own page faults stand for the instrumentation's.
//
// Clock truth: with -m TRACE_MARKER, the program writes "fl_sync N" to that
// ftrace instance's trace_marker between two CLOCK_MONOTONIC readings t0 and
// t1 and prints "sync N t0 t1" (nanoseconds) to stderr. ftrace stamps the
// marker with its trace clock inside the write, so
// trace_time(marker) - (t0+t1)/2 is the offset of the trace clock from
// CLOCK_MONOTONIC, give or take (t1-t0)/2.
//
// Workload: an anonymous region of NPAGES pages (THP off) touched in a
// shuffled order, each page first read or first written, then written and
// read again (faults: a read fault maps the zero page, the write after it
// faults again to copy it); then half the region is replaced with MAP_FIXED
// and touched again (the same pages fault a second time); a second thread
// touches a region of its own.
//
// Build: cc -O1 -g -pthread -o selftrace selftrace.c
// Usage: selftrace [-f t|tt|none] [-n NPAGES] [-m TRACE_MARKER] [-g GO_FILE] LOGFILE
//   -f tt    (default) time and thread id: "SEC.USEC: TID: 0xIP: R 0xADDR"
//   -f t     time only:                    "SEC.USEC: 0xIP: R 0xADDR"
//   -f none  pinatrace's own layout:       "0xIP: R 0xADDR"
//   -g FILE  print the pid, then wait until FILE exists (tracing set up)
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { FMT_TT, FMT_T, FMT_NONE };
static int fmt = FMT_TT;

static char *logbuf;
static size_t loglen, logcap;
static pthread_mutex_t loglock = PTHREAD_MUTEX_INITIALIZER;

extern char site_read[], site_write[], site_write2[];

__attribute__((noinline)) static unsigned char rd(volatile unsigned char *p) {
	unsigned char v;
	__asm__ volatile(".globl site_read\nsite_read: movb (%1), %0" : "=r"(v) : "r"(p) : "memory");
	return v;
}

__attribute__((noinline)) static void wr(volatile unsigned char *p, unsigned char v) {
	__asm__ volatile(".globl site_write\nsite_write: movb %1, (%0)" : : "r"(p), "r"(v) : "memory");
}

__attribute__((noinline)) static void wr2(volatile unsigned char *p, unsigned char v) {
	__asm__ volatile(".globl site_write2\nsite_write2: movb %1, (%0)" : : "r"(p), "r"(v) : "memory");
}

static void logaccess(void *ip, char rw, volatile void *addr) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	pthread_mutex_lock(&loglock);
	if (logcap - loglen < 128) {
		fprintf(stderr, "selftrace: log buffer full\n");
		exit(1);
	}
	char *b = logbuf + loglen;
	int n;
	switch (fmt) {
	case FMT_TT:
		n = sprintf(b, "%ld.%06ld: %ld: %p: %c %p\n", (long)ts.tv_sec, ts.tv_nsec / 1000,
			    (long)syscall(SYS_gettid), ip, rw, (void *)addr);
		break;
	case FMT_T:
		n = sprintf(b, "%ld.%06ld: %p: %c %p\n", (long)ts.tv_sec, ts.tv_nsec / 1000, ip, rw, (void *)addr);
		break;
	default:
		n = sprintf(b, "%p: %c %p\n", ip, rw, (void *)addr);
	}
	loglen += n;
	pthread_mutex_unlock(&loglock);
}

static unsigned char R(volatile unsigned char *p) { logaccess(site_read, 'R', p); return rd(p); }
static void W(volatile unsigned char *p, unsigned char v) { logaccess(site_write, 'W', p); wr(p, v); }
static void W2(volatile unsigned char *p, unsigned char v) { logaccess(site_write2, 'W', p); wr2(p, v); }

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static long pagesz;

static void touch(unsigned char *base, long npages, unsigned sum[1]) {
	long *order = malloc(npages * sizeof *order);
	for (long i = 0; i < npages; i++) order[i] = i;
	for (long i = npages - 1; i > 0; i--) {
		long j = next() % (i + 1), t = order[i];
		order[i] = order[j], order[j] = t;
	}
	for (long k = 0; k < npages; k++) {
		unsigned char *pg = base + order[k] * pagesz;
		long off = next() % (pagesz - 64);
		switch (next() % 3) {
		case 0: // read first: zero page, then a copy-on-write fault
			sum[0] += R(pg + off);
			W(pg + off + 8, 1);
			break;
		case 1: // write first: one fault
			W2(pg + off, 2);
			sum[0] += R(pg + off + 16);
			break;
		default: // several accesses, one fault
			W(pg + off, 3);
			W(pg + off + 32, 4);
			sum[0] += R(pg + off);
		}
	}
	free(order);
}

struct targ { long npages; unsigned sum; };

static void *thread_main(void *p) {
	struct targ *a = p;
	unsigned char *m = mmap(NULL, a->npages * pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) { perror("mmap"); exit(1); }
	touch(m, a->npages, &a->sum);
	munmap(m, a->npages * pagesz);
	return NULL;
}

static void sync_marker(int fd, int n) {
	if (fd < 0) return;
	char msg[32];
	int len = snprintf(msg, sizeof msg, "fl_sync %d", n);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (write(fd, msg, len) != len) { perror("write trace_marker"); exit(1); }
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "sync %d %lld %lld\n", n, t0.tv_sec * 1000000000LL + t0.tv_nsec, t1.tv_sec * 1000000000LL + t1.tv_nsec);
}

int main(int argc, char **argv) {
	long npages = 2000;
	const char *marker = NULL, *gofile = NULL;
	int c;
	while ((c = getopt(argc, argv, "f:n:m:g:")) != -1) {
		switch (c) {
		case 'f': fmt = !strcmp(optarg, "t") ? FMT_T : !strcmp(optarg, "none") ? FMT_NONE : FMT_TT; break;
		case 'n': npages = atol(optarg); break;
		case 'm': marker = optarg; break;
		case 'g': gofile = optarg; break;
		default: return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: selftrace [-f t|tt|none] [-n NPAGES] [-m TRACE_MARKER] [-g GO_FILE] LOGFILE\n");
		return 2;
	}
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	pagesz = sysconf(_SC_PAGESIZE);
	logcap = (size_t)npages * 4 * 128 + (1 << 20);
	logbuf = malloc(logcap);
	if (gofile) {
		printf("%d\n", getpid());
		fflush(stdout);
		while (access(gofile, F_OK) != 0) usleep(1000);
	}
	int mfd = marker ? open(marker, O_WRONLY) : -1;
	if (marker && mfd < 0) { perror(marker); return 1; }
	for (int i = 0; i < 10; i++) sync_marker(mfd, i);

	unsigned sum = 0;
	size_t len = npages * pagesz;
	unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) { perror("mmap"); return 1; }
	touch(m, npages, &sum);
	// Replace the first half: the same addresses, fresh pages, new faults.
	if (mmap(m, len / 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
		perror("mmap fixed");
		return 1;
	}
	touch(m, npages / 2, &sum);

	struct targ a = {npages / 4, 0};
	pthread_t th;
	pthread_create(&th, NULL, thread_main, &a);
	pthread_join(th, NULL);
	for (int i = 10; i < 20; i++) sync_marker(mfd, i);

	FILE *f = fopen(argv[optind], "w");
	if (!f) { perror(argv[optind]); return 1; }
	fwrite(logbuf, 1, loglen, f);
	fprintf(f, "#eof\n");
	fclose(f);
	fprintf(stderr, "selftrace: sum %u\n", sum + a.sum);
	// The program's own maps, for symbolizing with --maps.
	char path[64];
	snprintf(path, sizeof path, "%s.maps", argv[optind]);
	FILE *in = fopen("/proc/self/maps", "r"), *out = fopen(path, "w");
	if (in && out) {
		char buf[4096];
		size_t n;
		while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
	}
	if (in) fclose(in);
	if (out) fclose(out);
	return 0;
}
