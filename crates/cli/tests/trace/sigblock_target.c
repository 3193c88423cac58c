/* Application signal handlers interrupting blocked traced calls
 * (crates/cli/tests/trace_sigblock.rs, with sigblock.bpf.c): under
 * `bpfjet trace` each handler's system calls must be traced as the
 * kernel's tracepoints see them, whatever the interrupted call's path.
 *
 * - A thread blocked in glibc's `read` (the libc-wrapper fast path) on fd
 *   80 and one blocked in a raw `syscall(SYS_read)` (the SIGSYS path) on
 *   fd 81 are interrupted ROUNDS times each by SIGUSR1, whose handler
 *   calls handler_mark (probed), getppid twice and writes one byte to
 *   fd 78 (/dev/null).
 * - The old action read back is the application's (handler, flags and
 *   mask, which holds every signal, SIGSYS too).
 * - With the argument "wait", SIGUSR1's handler is installed, "ready" is
 *   printed, and the rest waits for a line on stdin (`bpfjet trace --pid`
 *   attaches meanwhile: the handler was in place before the agent).
 * - SA_RESETHAND: SIGHUP's handler runs once, then the action is SIG_DFL.
 * - Threads blocked in `read` on fd 82 (fast) and a raw read on fd 83
 *   (slow) are interrupted by SIGUSR2, whose handler calls getppid and
 *   siglongjmps out; each then calls getegid LATER times (still traced).
 * Exit 42 when everything behaved; another code names what did not. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "raw_syscall.h"

#define ROUNDS 20
#define LATER 5

static volatile int hits;
static int wfd[84];

/* Probed (a uprobe inside the handler). */
volatile int marks;
__attribute__((noinline)) void handler_mark(void)
{
	marks++;
}

static void on_usr1(int sig)
{
	(void)sig;
	handler_mark();
	getppid();
	getppid();
	if (write(78, "h", 1) != 1)
		_exit(5);
	hits++;
}

static __thread sigjmp_buf jump;

static void on_usr2(int sig)
{
	(void)sig;
	getppid();
	siglongjmp(jump, 1);
}

struct reader {
	int fd;
	int raw;
	int jumps;
	volatile pid_t tid;
	pthread_t thread;
};

static long read_one(struct reader *r)
{
	char c;
	if (r->raw) {
		long n = raw_syscall(SYS_read, r->fd, (long)&c, 1);
		if (n < 0) {
			errno = -n;
			return -1;
		}
		return n;
	}
	return read(r->fd, &c, 1);
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	r->tid = gettid();
	if (r->jumps) {
		if (sigsetjmp(jump, 1) == 0) {
			read_one(r);
			_exit(6); /* the signal should have jumped out */
		}
		for (int i = 0; i < LATER; i++)
			getegid();
		return NULL;
	}
	for (;;) {
		long n = read_one(r);
		if (n < 0 && errno == EINTR)
			continue;
		return NULL;
	}
}

/* Waits until thread `tid` is inside read(2). */
static void wait_blocked(pid_t tid)
{
	char path[64], buf[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	for (;;) {
		int fd = open(path, O_RDONLY);
		ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
		if (fd >= 0)
			close(fd);
		if (n > 1 && buf[0] == '0' && buf[1] == ' ')
			return;
		usleep(1000);
	}
}

static void start(struct reader *r, int fd, int raw, int jumps)
{
	int p[2];
	if (pipe(p) || dup2(p[0], fd) != fd)
		exit(2);
	close(p[0]);
	wfd[fd] = p[1];
	r->fd = fd;
	r->raw = raw;
	r->jumps = jumps;
	r->tid = 0;
	if (pthread_create(&r->thread, NULL, reader_main, r))
		exit(2);
	while (!r->tid)
		sched_yield();
	wait_blocked(r->tid);
}

int main(int argc, char **argv)
{
	int null = open("/dev/null", O_WRONLY);
	if (null < 0 || dup2(null, 78) != 78)
		return 2;
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	/* The mask of a handler may hold SIGSYS (sigfillset does). */
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL))
		return 2;
	if (argc > 1 && !strcmp(argv[1], "wait")) {
		/* `bpfjet trace --pid` attaches now: SIGUSR1's handler was
		 * installed before. */
		char line[16];
		puts("ready");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin))
			return 2;
	}
	if (sigaction(SIGUSR1, NULL, &old) || old.sa_handler != on_usr1 ||
	    (old.sa_flags & (SA_SIGINFO | SA_RESETHAND | SA_NODEFER)) ||
	    !sigismember(&old.sa_mask, SIGSYS) || !sigismember(&old.sa_mask, SIGUSR2))
		return 3;
	/* Replacing reports the previous handler too. */
	if (sigaction(SIGUSR1, &sa, &old) || old.sa_handler != on_usr1)
		return 3;

	struct reader fast, slow;
	start(&fast, 80, 0, 0);
	start(&slow, 81, 1, 0);
	for (int i = 0; i < ROUNDS; i++) {
		struct reader *r = i % 2 ? &slow : &fast;
		for (int k = 0; k < 2; k++, r = r == &fast ? &slow : &fast) {
			int before = hits;
			pthread_kill(r->thread, SIGUSR1);
			while (hits == before)
				sched_yield();
			wait_blocked(r->tid);
		}
	}
	if (write(wfd[80], "x", 1) != 1 || write(wfd[81], "x", 1) != 1)
		return 2;
	pthread_join(fast.thread, NULL);
	pthread_join(slow.thread, NULL);

	/* SA_RESETHAND: one run, then SIG_DFL (as read back). */
	sa.sa_flags = SA_RESETHAND;
	if (sigaction(SIGHUP, &sa, NULL))
		return 2;
	int before = hits;
	raise(SIGHUP);
	if (hits != before + 1)
		return 4;
	if (sigaction(SIGHUP, NULL, &old) || old.sa_handler != SIG_DFL)
		return 4;

	/* siglongjmp out of handlers interrupting blocked calls. */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr2;
	if (sigaction(SIGUSR2, &sa, NULL))
		return 2;
	struct reader jf, js;
	start(&jf, 82, 0, 1);
	pthread_kill(jf.thread, SIGUSR2);
	pthread_join(jf.thread, NULL);
	start(&js, 83, 1, 1);
	pthread_kill(js.thread, SIGUSR2);
	pthread_join(js.thread, NULL);
	return 42;
}
