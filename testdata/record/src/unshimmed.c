/*
 * unshimmed: a program whose children run other programs out of reach of
 * record's in-process shim — for record's live test of them
 * (cmd/faultline/internal/cli/record_unshimmed_live_test.go). It runs
 * itself as "child" three times, one after another: after clearenv(),
 * with LD_PRELOAD set empty, and (as root) after dropping to uid and gid
 * 65534. Each child makes 1000 malloc(3000) + 1000 free and writes a line
 * to standard output and one to standard error; so does the parent.
 *
 * usage: unshimmed
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void work(const char *who)
{
	for (int i = 0; i < 1000; i++) {
		void *p = malloc(3000);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
	printf("%s: 1000 malloc(3000)\n", who);
	fprintf(stderr, "%s: done\n", who);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0) {
		work(argv[2]);
		return 0;
	}
	const char *how[] = {"clearenv", "ld_preload", "setuid"};
	for (int i = 0; i < 3; i++) {
		if (i == 2 && geteuid() != 0)
			break;
		fflush(NULL);
		pid_t p = fork();
		if (p == 0) {
			if (i == 0)
				clearenv();
			if (i == 1)
				setenv("LD_PRELOAD", "", 1);
			if (i == 2 && (setgid(65534) != 0 || setuid(65534) != 0))
				_exit(3);
			execl("/proc/self/exe", argv[0], "child", how[i], (char *)NULL);
			_exit(127);
		}
		waitpid(p, NULL, 0);
	}
	work("parent");
	return 0;
}
