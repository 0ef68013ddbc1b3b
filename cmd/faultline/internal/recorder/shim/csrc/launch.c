/*
 * launch.c — the launcher. faultline record starts the command it
 * records through this object run as a program — it has an interpreter (PT_INTERP) and an
 * entry point, fl_launch_start — which costs a few milliseconds less than
 * starting faultline's own Go runtime again for the same job. It keeps
 * the protocol of faultline's Go launcher (package launch, which remains
 * the launcher where the shim cannot run):
 *  - argv is the command's argv[0], the command's path, then the command's
 *    argv from its argv[0];
 *  - FAULTLINE_RECORD_LAUNCH is "1", or "nothp" for transparent huge pages
 *    off; FAULTLINE_RECORD_PRELOAD becomes LD_PRELOAD (replacing one in
 *    the environment); both leave the command's environment;
 *  - it asks for SIGKILL when the thread that started it exits
 *    (PR_SET_PDEATHSIG, kept across the exec), then waits for one byte on
 *    file descriptor 3: EOF (the recorder gone or giving up) exits 127
 *    without running the command;
 *  - a command that cannot be run exits 127, as a shell's.
 */
#include "shim.h"

#define LAUNCH_ENV "FAULTLINE_RECORD_LAUNCH="
#define LAUNCH_PRELOAD "FAULTLINE_RECORD_PRELOAD="
#define LD_PRELOAD_ "LD_PRELOAD="

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static __attribute__((noreturn)) void launch_fail(const char *what, const char *arg)
{
	const char *why = strerror(errno);
	dprintf(2, "faultline: %s%s: %s\n", what, arg, why);
	_exit(127);
}

/* fl_launch_main is the launcher, called by its entry (fl_launch_start,
 * stubs-x86_64.S, which also names the interpreter) with the stack pointer
 * the kernel started it with. */
HIDDEN __attribute__((noreturn, used)) void fl_launch_main(uint64_t *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		launch_fail("PR_SET_PDEATHSIG", "");
	char b;
	ssize_t n = read(3, &b, 1);
	close(3);
	if (n != 1 || argc < 3)
		_exit(127);
	int envc = 0;
	const char *mode = "", *preload = NULL;
	for (char **e = envp; *e; e++, envc++) {
		if (has_prefix(*e, LAUNCH_ENV))
			mode = *e + strlen(LAUNCH_ENV);
		else if (has_prefix(*e, LAUNCH_PRELOAD))
			preload = *e + strlen(LAUNCH_PRELOAD);
	}
	if (strcmp(mode, "nothp") == 0 &&
	    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
		launch_fail("disabling transparent huge pages", "");
	char *env[envc + 2];
	int k = 0;
	for (char **e = envp; *e; e++)
		if (!has_prefix(*e, LAUNCH_ENV) && !has_prefix(*e, LAUNCH_PRELOAD) &&
		    !(preload && has_prefix(*e, LD_PRELOAD_)))
			env[k++] = *e;
	char ld[preload ? strlen(LD_PRELOAD_) + strlen(preload) + 1 : 1];
	if (preload) {
		strcpy(ld, LD_PRELOAD_);
		strcat(ld, preload);
		env[k++] = ld;
	}
	env[k] = NULL;
	execve(argv[1], argv + 2, env);
	launch_fail("cannot run ", argv[1]);
}
