// prog.c is the fixture program for faultline's unwinder tests; build.sh
// builds it and records it with perf. Every "touch" is the first write to a
// fresh anonymous page, so a page-faults:u -c 1 recording samples exactly
// there, at known depths:
//   main -> recurse x10 -> touch
//   main -> qsort (libc) -> ... -> cmp -> touch
//   main -> raise -> [signal frame] handler -> recurse x3 -> touch
//   clone3 -> start_thread -> thread_main -> recurse x5 -> touch
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>

#define PAGE 4096

static char *region;
static int next_page;
static volatile int touch_in_cmp = 1;

// noipa: no inlining, cloning or IPA-SRA, so the stacks match the source.
__attribute__((noipa)) static void touch(void) {
	region[(next_page++) * PAGE] = 1;
}

__attribute__((noipa)) static int recurse(int n) {
	if (n == 0) {
		touch();
		return 0;
	}
	int r = recurse(n - 1);
	__asm__ volatile("" ::: "memory"); // keep the call a real call, not a tail call
	return r + 1;
}

static int cmp(const void *a, const void *b) {
	if (touch_in_cmp) {
		touch_in_cmp = 0;
		touch();
	}
	return *(const int *)a - *(const int *)b;
}

static void handler(int sig) {
	(void)sig;
	recurse(3);
	__asm__ volatile("" ::: "memory"); // not a tail call: handler stays on the stack
}

static void *thread_main(void *arg) {
	(void)arg;
	recurse(5);
	__asm__ volatile("" ::: "memory");
	return NULL;
}

int main(void) {
	region = mmap(NULL, 64 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		return 1;
	recurse(10);
	int v[16] = {5, 3, 9, 1, 7, 2, 8, 6, 4, 0, 15, 11, 13, 12, 10, 14};
	qsort(v, 16, sizeof v[0], cmp);
	signal(SIGUSR1, handler);
	raise(SIGUSR1);
	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, NULL) != 0)
		return 1;
	pthread_join(t, NULL);
	return 0;
}
