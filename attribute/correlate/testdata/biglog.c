// biglog: makes a large access log for the streaming-memory check of
// faultline correlate (the README's "2 GB access log" number). It repeats
// the accesses of a real access log (selftrace -f tt) with their times
// shifted by 10 ms per copy, each followed by 8 accesses to random pages of
// a 1 GiB range that no fault touches, until LIMIT bytes. Not a fixture:
// generate, measure, delete.
//
//   cc -O2 -o biglog biglog.c
//   ./biglog access.log 2147483648 > big.log
//   /usr/bin/time -v faultline correlate big.log faults.trace   # Maximum resident set size
#include <stdio.h>
#include <stdlib.h>

#define MAXACC 1000000

static long long sec[MAXACC], us[MAXACC];
static int tid[MAXACC];
static unsigned long ip[MAXACC], addr[MAXACC];
static char rw[MAXACC];

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: biglog ACCESSLOG LIMIT_BYTES > big.log\n");
		return 2;
	}
	FILE *in = fopen(argv[1], "r");
	if (!in) { perror(argv[1]); return 1; }
	long long limit = atoll(argv[2]);
	char line[256];
	int n = 0;
	while (n < MAXACC && fgets(line, sizeof line, in))
		if (sscanf(line, "%lld.%lld: %d: %lx: %c %lx", &sec[n], &us[n], &tid[n], &ip[n], &rw[n], &addr[n]) == 6) n++;
	if (n == 0) { fprintf(stderr, "biglog: no SEC.USEC: TID: 0xIP: R|W 0xADDR lines in %s\n", argv[1]); return 1; }
	static char buf[1 << 20];
	setvbuf(stdout, buf, _IOFBF, sizeof buf);
	long long written = 0;
	unsigned long r = 88172645463325252ul;
	for (long long copy = 0; written < limit; copy++) {
		for (int i = 0; i < n && written < limit; i++) {
			long long t = sec[i] * 1000000 + us[i] + copy * 10000;
			written += printf("%lld.%06lld: %d: 0x%lx: %c 0x%lx\n", t / 1000000, t % 1000000, tid[i], ip[i], rw[i], addr[i]);
			for (int k = 0; k < 8; k++) {
				r ^= r << 13, r ^= r >> 7, r ^= r << 17;
				written += printf("%lld.%06lld: %d: 0x%lx: %c 0x%lx\n", t / 1000000, t % 1000000, tid[i], ip[i],
						  (r & 1) ? 'R' : 'W', 0x100000000000ul + (r >> 20) % (1ul << 30));
			}
		}
	}
	return 0;
}
