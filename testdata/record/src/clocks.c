/*
 * clocks.c — checks the in-process recorder's time stamps against the
 * program's own clock (cmd/faultline/internal/cli's
 * TestRecordInprocLiveClock). THREADS threads each make CALLS pairs of
 * malloc(3000 + 16 × thread) and free, reading CLOCK_MONOTONIC before the
 * malloc, between the two calls and after the free; every 500 calls a
 * thread sleeps 100 µs, longer than the shim goes between two readings
 * of CLOCK_MONOTONIC when it stamps from the TSC, so stamps come both
 * from fresh readings and from the TSC. Nothing else is allocated until
 * the threads are done. Then it writes, to the file argv[1], one line per
 * call: "tid size k before mid after" (ns). A recorded malloc's stamps
 * lie in [before, mid] and its free's in [mid, after]. With a second
 * argument "notsc" the program first makes RDTSC fault in its threads
 * (prctl PR_SET_TSC, after a first malloc, so with the shim already
 * running), as a sandbox might: the shim must stop reading the TSC.
 *
 *   cc -O2 -pthread -o clocks clocks.c && faultline record -- ./clocks out.txt
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define THREADS 4
#define CALLS 20000

static uint64_t stamps[THREADS][CALLS][3];
static long tids[THREADS];

static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *work(void *arg)
{
	int i = (int)(intptr_t)arg;
	size_t size = 3000 + 16 * (size_t)i;
	tids[i] = syscall(SYS_gettid);
	for (int k = 0; k < CALLS; k++) {
		uint64_t *s = stamps[i][k];
		s[0] = now();
		char *volatile p = malloc(size);
		s[1] = now();
		free(p);
		s[2] = now();
		if (k % 500 == 499) {
			struct timespec d = {0, 100 * 1000};
			nanosleep(&d, NULL);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "notsc") != 0)) {
		fprintf(stderr, "usage: clocks OUTFILE [notsc]\n");
		return 2;
	}
	if (argc == 3) {
		free(malloc(1));
		if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) != 0) {
			perror("prctl PR_SET_TSC");
			return 1;
		}
	}
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, work, (void *)(intptr_t)i) != 0)
			return 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	FILE *f = fopen(argv[1], "w");
	if (!f)
		return 1;
	for (int i = 0; i < THREADS; i++)
		for (int k = 0; k < CALLS; k++)
			fprintf(f, "%ld %zu %d %llu %llu %llu\n", tids[i],
				3000 + 16 * (size_t)i, k,
				(unsigned long long)stamps[i][k][0],
				(unsigned long long)stamps[i][k][1],
				(unsigned long long)stamps[i][k][2]);
	return fclose(f) != 0;
}
