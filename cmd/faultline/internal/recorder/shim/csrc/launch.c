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
 *    (PR_SET_PDEATHSIG, kept across the exec); with
 *    FAULTLINE_RECORD_EXITS set (which leaves the command's environment
 *    too) it stops the command's exits for the recorder (arm_exits); then
 *    it waits for one byte on file descriptor 3: EOF (the recorder gone
 *    or giving up) exits 127 without running the command;
 *  - a command that cannot be run exits 127, as a shell's.
 */
#include "shim.h"
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/socket.h>

#define LAUNCH_ENV "FAULTLINE_RECORD_LAUNCH="
#define LAUNCH_PRELOAD "FAULTLINE_RECORD_PRELOAD="
#define LAUNCH_EXITS "FAULTLINE_RECORD_EXITS="
#define LD_PRELOAD_ "LD_PRELOAD="

/* The socket the exit notifications' descriptor goes over. */
#define EXITS_FD 4

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

/* arm_exits installs the seccomp filter that turns exit_group into a user
 * notification (seccomp_unotify(2)) for this process and everything it
 * runs (the filter is inherited by children and kept across execve), and
 * sends the notification descriptor over EXITS_FD, which it closes: the
 * process at the other end (faultline's guard, package launch's
 * exitrelay.go) holds each exiting process until the recorder has read
 * its memory, then lets the call go on. The same filter as package
 * launch's Go launcher installs (exits.go): another ABI's calls (32-bit)
 * pass. Installing it needs CAP_SYS_ADMIN (no_new_privs stays unset:
 * set-uid programs keep working); without it the socket closes with
 * nothing sent and the command runs as it would have. */
static void arm_exits(void)
{
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = { .len = sizeof prog / sizeof prog[0], .filter = prog };
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog);
	if (fd >= 0) {
		char one = 1;
		struct iovec iov = { .iov_base = &one, .iov_len = 1 };
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int))];
		} ctl;
		memset(&ctl, 0, sizeof ctl);
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		int listener = (int)fd;
		memcpy(CMSG_DATA(h), &listener, sizeof listener);
		/* A guard gone meanwhile: no SIGPIPE, the gate's EOF follows.
		 * The system call itself: <sys/socket.h> comes after shim.h's
		 * visibility pragma, which would hide libc's sendmsg. */
		syscall(SYS_sendmsg, EXITS_FD, &m, MSG_NOSIGNAL);
		close(listener);
	}
	close(EXITS_FD);
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
	for (char **e = envp; *e; e++)
		if (has_prefix(*e, LAUNCH_EXITS)) {
			arm_exits();
			break;
		}
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
		    !has_prefix(*e, LAUNCH_EXITS) &&
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
