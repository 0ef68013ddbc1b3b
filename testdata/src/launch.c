/*
 * launch: run a fixture with deterministic page-fault behaviour.
 *
 *   launch PROGRAM [ARG...]
 *
 * Sets, then execvp's PROGRAM:
 *   - prctl(PR_SET_THP_DISABLE, 1): no transparent huge pages, so every 4 KiB
 *     page faults separately (with THP one fault can map 2 MiB). The flag is
 *     inherited by children and kept across exec.
 *   - personality(ADDR_NO_RANDOMIZE): the PIE base (0x555555554000), heap,
 *     mmap area and stack are at the same addresses in every run, so
 *     regenerating the fixtures changes as little of the reference text as
 *     possible. Inherited across fork and exec like the THP flag.
 *
 * Linked statically (gen.sh uses -static) so it makes no malloc calls through
 * libc.so.6 (the probes see none) and only a handful of page faults of its own
 * before the exec: the first COMM in every recording is "launch", then an
 * exec COMM renames the process to the fixture.
 */
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/personality.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs("usage: launch PROGRAM [ARG...]\n", stderr);
		return 2;
	}
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
		fprintf(stderr, "launch: prctl(PR_SET_THP_DISABLE): %s\n", strerror(errno));
		return 1;
	}
	if (personality(PER_LINUX | ADDR_NO_RANDOMIZE) == -1) {
		fprintf(stderr, "launch: personality(ADDR_NO_RANDOMIZE): %s\n", strerror(errno));
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "launch: exec %s: %s\n", argv[1], strerror(errno));
	return 127;
}
