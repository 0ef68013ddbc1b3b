/*
 * otherstacks: allocations made on stacks that are not their thread's own
 * — a coroutine's (makecontext and swapcontext on a stack the program
 * maps) and a signal handler's alternate stack (sigaltstack) — the cases
 * where the recorder cannot copy up to the top of the thread's stack and
 * copies up to its cap instead, as far as the memory above the stack
 * pointer can be read.
 *
 * Every allocation is at least 8192 bytes (--stack-min's default is 4096:
 * each gets a stack) and its size says where it was made:
 *   8192 + 8·d    in the coroutine, d frames of climb deep (1..DEPTH),
 *                 whose stack's root is the coroutine's start
 *                 (__start_context) — reachable from the copy;
 *   16384 + 8·k   in the handler of the k-th SIGUSR1 (1..SIGNALS), raised
 *                 by the program itself, on the alternate stack: the
 *                 interrupted frames lie on the thread's own stack, which
 *                 a copy from the alternate stack does not hold, so that
 *                 stack ends after the signal frame (__restore_rt).
 *
 * usage: otherstacks [DEPTH [SIGNALS]]   (default 20 20)
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define CORO_STACK (256 << 10)
#define ALT_STACK (64 << 10)

static int depth = 20, nsignals = 20, signals_seen;
static ucontext_t main_ctx, coro_ctx;

/* Through a volatile pointer, so that the compiler cannot elide a pair. */
static char *volatile keep;

static __attribute__((noinline)) void climb(int d)
{
	volatile char frame[64];
	frame[0] = (char)d;
	char *p = malloc(8192 + 8 * (size_t)d);
	keep = p;
	if (d < depth)
		climb(d + 1);
	p[0] = frame[0]; /* not a tail call */
	free(p);
}

static void coro_main(void)
{
	climb(1);
}

static __attribute__((noinline)) void on_signal(int sig)
{
	(void)sig;
	/* Raised synchronously (raise, below), never inside the allocator. */
	char *p = malloc(16384 + 8 * (size_t)++signals_seen);
	keep = p;
	free(p);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		depth = atoi(argv[1]);
	if (argc > 2)
		nsignals = atoi(argv[2]);
	if (depth < 1 || nsignals < 0)
		return 2;

	char *cs = mmap(NULL, CORO_STACK, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (cs == MAP_FAILED || getcontext(&coro_ctx) != 0)
		return 1;
	coro_ctx.uc_stack.ss_sp = cs;
	coro_ctx.uc_stack.ss_size = CORO_STACK;
	coro_ctx.uc_link = &main_ctx;
	makecontext(&coro_ctx, coro_main, 0);
	if (swapcontext(&main_ctx, &coro_ctx) != 0)
		return 1;

	stack_t ss = {.ss_size = ALT_STACK};
	ss.ss_sp = mmap(NULL, ALT_STACK, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (ss.ss_sp == MAP_FAILED || sigaltstack(&ss, NULL) != 0)
		return 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_ONSTACK;
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		return 1;
	for (int k = 0; k < nsignals; k++)
		raise(SIGUSR1);
	return signals_seen != nsignals;
}
