/* A traced read(2) interrupted by a signal whose handler calls read(2)
 * itself (tests/trace_fusion_compile.rs): the handler's call runs inside the
 * outer call, on the same thread, so its sys_enter_read/sys_exit_read pair
 * overwrites and deletes the thread's hand-off entry and the outer exit
 * finds none — fused or not. The main thread blocks reading a pipe; a
 * helper thread waits until it sleeps in the kernel (its /proc state is
 * 'S': the only blocking call it makes is that read), sends SIGUSR1
 * (SA_RESTART: the read resumes after the handler), then writes the byte
 * the read returns. Then PLAIN reads of /dev/zero and writes of /dev/null
 * that nothing interrupts, BADF reads and writes of a closed descriptor
 * (-1, errno EBADF). Last, a thread blocked in a traced read of the
 * pipe is cancelled (read is a cancellation point: the unwinder must get
 * through whatever runs the pair around the call, its cleanup handler
 * says it did); its exit never runs.
 * Exit status 42 when every call did what it should. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NESTED 20
#define PLAIN 300
#define BADF 10

static int zero, null, closed, pipefd[2];
static pid_t main_tid;
static volatile int handled, handler_failed;

static void on_usr1(int sig)
{
	char b[16];
	(void)sig;
	if (read(zero, b, sizeof b) != sizeof b)
		handler_failed = 1;
	handled++;
}

/* The main thread sleeps in the kernel. */
static int sleeping(void)
{
	char path[64], buf[256], *p;
	int fd, n;

	snprintf(path, sizeof path, "/proc/self/task/%d/stat", main_tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'S';
}

static void *interrupter(void *arg)
{
	struct timespec ms = {0, 1000000};
	(void)arg;
	for (int i = 0; i < NESTED; i++) {
		while (!sleeping())
			nanosleep(&ms, NULL);
		int before = handled;
		syscall(SYS_tgkill, getpid(), main_tid, SIGUSR1);
		while (handled == before)
			nanosleep(&ms, NULL);
		if (write(pipefd[1], "x", 1) != 1)
			return (void *)1;
	}
	return NULL;
}

static volatile pid_t reader_tid;

static volatile int unwound;

static void reader_cleanup(void *arg)
{
	(void)arg;
	unwound = 1;
}

/* Built with -fexceptions, pthread_cleanup_push is a cleanup attribute:
 * its handler runs only if the unwinder walks from the cancelled read
 * (wherever its code runs) up to this frame. */
static void *blocked_reader(void *arg)
{
	char c;
	void *r = NULL;
	(void)arg;
	pthread_cleanup_push(reader_cleanup, NULL);
	reader_tid = gettid();
	if (read(pipefd[0], &c, 1) == 1)
		r = (void *)1;
	pthread_cleanup_pop(0);
	return r;
}

int main(void)
{
	struct sigaction sa;
	pthread_t t;
	char b[64];
	void *rc;

	zero = open("/dev/zero", O_RDONLY);
	null = open("/dev/null", O_WRONLY);
	if (zero < 0 || null < 0 || pipe(pipefd))
		return 1;
	closed = dup(null);
	if (closed < 0 || close(closed))
		return 1;
	main_tid = gettid();
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	if (pthread_create(&t, NULL, interrupter, NULL))
		return 1;
	for (int i = 0; i < NESTED; i++)
		if (read(pipefd[0], b, 1) != 1)
			return 2;
	if (pthread_join(t, &rc) || rc)
		return 3;
	for (int i = 0; i < PLAIN; i++)
		if (read(zero, b, sizeof b) != sizeof b || write(null, b, sizeof b) != sizeof b)
			return 4;
	/* Failing calls: -1 and errno EBADF reach the caller through the pair
	 * (the exit record holds -EBADF). */
	for (int i = 0; i < BADF; i++) {
		errno = 0;
		if (read(closed, b, 7) != -1 || errno != EBADF)
			return 8;
		errno = 0;
		if (write(closed, b, 7) != -1 || errno != EBADF)
			return 9;
	}
	/* sleeping() now watches the reader. */
	main_tid = 0;
	if (pthread_create(&t, NULL, blocked_reader, NULL))
		return 6;
	{
		struct timespec ms = {0, 1000000};
		while (!reader_tid)
			nanosleep(&ms, NULL);
		main_tid = reader_tid;
		while (!sleeping())
			nanosleep(&ms, NULL);
	}
	if (pthread_cancel(t) || pthread_join(t, &rc) || rc != PTHREAD_CANCELED)
		return 7;
	if (!unwound)
		return 4;
	return handled == NESTED && !handler_failed ? 42 : 5;
}
