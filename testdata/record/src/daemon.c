/*
 * daemon: a command that starts a daemon the classic way and exits at
 * once — fork, setsid, fork again, the middle process exits, the
 * grandchild points its standard streams at /dev/null — for record's live
 * tests of a tree that outlives its command
 * (cmd/faultline/internal/cli/record_tree_live_test.go). The daemon makes
 * ROUNDS rounds of 100 malloc(5000) + 100 free, 10 ms apart, then exits:
 * 100·ROUNDS calls of each, all malloc(5000).
 *
 * usage: daemon ROUNDS
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 100;
	if (fork() != 0)
		return 0;
	setsid();
	if (fork() != 0)
		_exit(0);
	int fd = open("/dev/null", O_RDWR);
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	for (int r = 0; r < rounds; r++) {
		void *p[100];
		for (int i = 0; i < 100; i++) {
			p[i] = malloc(5000);
			/* escapes: the compiler may not remove the pair */
			__asm__ volatile("" : : "r"(p[i]) : "memory");
		}
		for (int i = 0; i < 100; i++)
			free(p[i]);
		usleep(10000);
	}
	return 0;
}
