/*
 * lifecycle: every way a process's allocator calls can come from somewhere
 * other than its main thread — the in-process recorder's live test
 * (cmd/faultline/internal/cli/record_inproc_live_test.go). Deterministic
 * counts:
 *
 *   main           100 malloc(1000) + 100 free, 10 calloc(10, 100),
 *                  10 realloc, 5 posix_memalign, 5 aligned_alloc
 *   signal handler 1 malloc(777) + 1 free (SIGUSR1 raised by main)
 *   THREADS        threads, each 50 malloc(64 + 8·i) + 50 free
 *   fork           the child: 20 malloc(2000) + 20 free, then _exit
 *   exec           a vfork'd child execs this program with "exec": 30
 *                  malloc(3000) + 30 free (plus its start-up's)
 *   posix_spawn    this program with "spawn": 40 malloc(4000) + 40 free
 *
 * usage: lifecycle [exec|spawn]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 64

extern char **environ;
static char *volatile sink;

static void churn(int n, size_t size)
{
	for (int i = 0; i < n; i++) {
		char *p = malloc(size);
		p[0] = (char)i;
		sink = p;
		free(p);
	}
}

static void *worker(void *arg)
{
	long id = (long)arg;
	for (int i = 0; i < 50; i++) {
		char *p = malloc(64 + 8 * (size_t)i + (size_t)id);
		p[0] = 1;
		sink = p;
		free(p);
	}
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	char *p = malloc(777);
	p[0] = 1;
	sink = p;
	free(p);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "exec") == 0) {
		churn(30, 3000);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "spawn") == 0) {
		churn(40, 4000);
		return 0;
	}
	churn(100, 1000);
	for (int i = 0; i < 10; i++) {
		char *p = calloc(10, 100);
		char *q = realloc(p, 2000);
		q[1999] = 1;
		sink = q;
		free(q);
	}
	for (int i = 0; i < 5; i++) {
		void *p;
		if (posix_memalign(&p, 64, 512) != 0)
			return 1;
		sink = p;
		free(p);
		p = aligned_alloc(128, 1024);
		sink = p;
		free(p);
	}
	signal(SIGUSR1, on_usr1);
	raise(SIGUSR1);

	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
			return 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);

	pid_t pid = fork();
	if (pid == 0) {
		churn(20, 2000);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);

	pid = vfork();
	if (pid == 0) {
		execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 2;

	char *args[] = {argv[0], "spawn", NULL};
	if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) != 0)
		return 3;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 4;
	return 0;
}
