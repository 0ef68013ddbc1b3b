/*
 * forkexec: a parent allocates and touches a block, forks; the child writes
 * the parent's block (copy-on-write faults) and then execs exectarget, which
 * lives next to this program (same directory as argv[0]).
 *
 * Run through launch (THP off, no ASLR). Same heap-chunk rule as basic.c:
 * a k-page block not starting on a page boundary has its first and last
 * spanned page mapped by malloc's own header writes, so touching one byte
 * per page from p[0] faults k-1 times.
 *
 * Site             process         call    size   #  faults after return
 * parent_alloc     parent          malloc  65536  1  15  (16 pages: k-1)
 * parent_alloc     child (forked)  -       -      -  16  (the child writes pages 0..15 of
 *                                                         the inherited block; every one is
 *                                                         mapped and shared read-only after
 *                                                         fork, so every write is a COW
 *                                                         fault, page 0 included)
 * after_fork_alloc parent          malloc  16384  1  3   (4 pages: k-1; allocated after the
 *                                                         child exited)
 * target_alloc     exectarget      malloc  32768  1  7   (see exectarget.c)
 *
 * The child's faults belong to the parent's allocation (same addresses,
 * inherited by fork). After the exec the child's address space is new: with
 * ASLR off exectarget's heap starts at the same address as forkexec's, so
 * target_alloc's block overlaps parent_alloc's addresses in the same pid;
 * an attributor that does not forget the pre-exec allocations at the exec
 * COMM would credit target_alloc's faults to parent_alloc.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "fixture.h"

void *volatile fixture_sink;

__attribute__((noinline, noclone)) char *parent_alloc(void)
{
	char *p = malloc(16 * PAGE);
	keep(p);
	touch_stride(p, 16 * PAGE);
	return p;
}

__attribute__((noinline, noclone)) void child_write(char *p)
{
	touch_stride(p, 16 * PAGE);
}

__attribute__((noinline, noclone)) char *after_fork_alloc(void)
{
	char *p = malloc(4 * PAGE);
	keep(p);
	touch_stride(p, 4 * PAGE);
	return p;
}

int main(int argc, char **argv)
{
	char target[4096];
	const char *slash = strrchr(argv[0], '/');
	size_t dirlen = slash ? (size_t)(slash - argv[0] + 1) : 0;
	if (argc < 1 || dirlen + sizeof "exectarget" > sizeof target)
		return 2;
	memcpy(target, argv[0], dirlen);
	memcpy(target + dirlen, "exectarget", sizeof "exectarget");

	char *p = parent_alloc();
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		child_write(p);
		char *args[] = { target, NULL };
		execv(target, args);
		_exit(127);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return 1;
	after_fork_alloc();
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
