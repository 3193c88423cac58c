/* A long-running multithreaded program that `bpfjet trace --pid` attaches
 * to (crates/cli/tests/trace_pid.rs). It is started normally, without
 * bpfjet. WORKERS threads wait idle (in nanosleep; one more thread waits
 * on a condition variable, a futex) for commands the main thread reads
 * from stdin (blocked in read). Attaching interrupts all of these system
 * calls; the program only works on if each is restarted correctly.
 *
 *   "run N"  every worker makes N rounds: pid_work(i) for i in 0..N, each
 *            followed by a 1-byte write to fd PIPE_FD (a pipe) and a read
 *            of it back; then "done CALLS BAD" (BAD: results of pid_work
 *            that were not 3 * i + 1; always 0 unless a probe corrupts)
 *   "spin"   every worker calls pid_work (and the pipe pair) until "stop",
 *            then "stopped CALLS BAD"
 *   "hold S" a new thread holds the dynamic loader's lock for S seconds
 *            (sleeping in a dl_iterate_phdr callback), then "holding"
 *   "exit"   "bye", exit status 7.
 * Output is flushed line by line. */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 3
#define PIPE_FD 100

__attribute__((noinline)) int pid_work(int x)
{
	/* Not foldable by the caller: the result goes through memory. */
	volatile int v = x;
	return 3 * v + 1;
}

static atomic_int command;      /* 0 idle, 1 run, 2 spin, 3 stop */
static atomic_int generation;   /* bumped per command */
static atomic_int finished;     /* workers done with this generation */
static atomic_long calls, bad;
static int rounds;
static int pipe_read_fd;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int leaving;

static void one_call(int i)
{
	char c = 'x';
	if (pid_work(i) != 3 * i + 1)
		atomic_fetch_add(&bad, 1);
	if (write(PIPE_FD, &c, 1) != 1 || read(pipe_read_fd, &c, 1) != 1)
		atomic_fetch_add(&bad, 1);
	atomic_fetch_add(&calls, 1);
}

static void *worker(void *arg)
{
	int seen = 0;
	(void)arg;
	for (;;) {
		struct timespec ts = {0, 1000000};
		while (atomic_load(&generation) == seen)
			nanosleep(&ts, NULL);
		seen = atomic_load(&generation);
		int cmd = atomic_load(&command);
		if (cmd == 1) {
			for (int i = 0; i < rounds; i++)
				one_call(i);
		} else if (cmd == 2) {
			for (int i = 0; atomic_load(&command) == 2; i = (i + 1) % 1000)
				one_call(i);
		}
		atomic_fetch_add(&finished, 1);
	}
	return NULL;
}

/* Waits on a futex for the whole run. */
static void *sleeper(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!leaving)
		pthread_cond_wait(&never, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static int hold_seconds;
static atomic_int held;

static int hold_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)info;
	(void)size;
	(void)data;
	struct timespec ts = {hold_seconds, 0};
	atomic_store(&held, 1);
	nanosleep(&ts, NULL);
	return 1;
}

/* dl_iterate_phdr holds the loader's lock around its callbacks: a
 * dlopen in another thread waits for it. */
static void *holder(void *arg)
{
	(void)arg;
	dl_iterate_phdr(hold_cb, NULL);
	return NULL;
}

static void start(int cmd)
{
	atomic_store(&finished, 0);
	atomic_store(&calls, 0);
	atomic_store(&bad, 0);
	atomic_store(&command, cmd);
	atomic_fetch_add(&generation, 1);
}

static void wait_workers(void)
{
	struct timespec ts = {0, 1000000};
	while (atomic_load(&finished) < WORKERS)
		nanosleep(&ts, NULL);
}

int main(void)
{
	int p[2];
	pthread_t t;
	char line[64];
	if (pipe(p) || dup2(p[1], PIPE_FD) < 0)
		return 2;
	pipe_read_fd = p[0];
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&t, NULL, worker, NULL);
	pthread_create(&t, NULL, sleeper, NULL);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "run ", 4)) {
			rounds = atoi(line + 4);
			start(1);
			wait_workers();
			printf("done %ld %ld\n", atomic_load(&calls), atomic_load(&bad));
		} else if (!strcmp(line, "spin\n")) {
			start(2);
			printf("spinning\n");
		} else if (!strcmp(line, "stop\n")) {
			atomic_store(&command, 3);
			wait_workers();
			printf("stopped %ld %ld\n", atomic_load(&calls), atomic_load(&bad));
		} else if (!strncmp(line, "hold ", 5)) {
			struct timespec ts = {0, 1000000};
			hold_seconds = atoi(line + 5);
			pthread_create(&t, NULL, holder, NULL);
			while (!atomic_load(&held))
				nanosleep(&ts, NULL);
			printf("holding\n");
		} else if (!strcmp(line, "exit\n")) {
			pthread_mutex_lock(&lock);
			leaving = 1;
			pthread_cond_signal(&never);
			pthread_mutex_unlock(&lock);
			printf("bye\n");
			return 7;
		}
	}
	return 3;
}
