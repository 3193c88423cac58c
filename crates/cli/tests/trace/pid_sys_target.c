/* A long-running multithreaded program whose system calls `bpfjet trace
 * --pid` traces once attached (crates/cli/tests/trace_pid.rs). Started
 * normally, without bpfjet; driven through stdin. WORKERS threads wait
 * idle in nanosleep for a command; the main thread reads stdin.
 *
 *   "go N"    every worker makes N rounds of: write(PIPE_FD, 1 byte),
 *             read(READ_FD, 1 byte), a raw getpid `syscall` (no libc
 *             wrapper: the signal path); then "done W R G": the
 *             calls that succeeded (W writes, R reads, G getpid calls)
 *   "spawn N" a thread created now makes N rounds and is joined:
 *             "spawned W R G"
 *   "fork N"  a child process makes N getpid calls and exits (its calls
 *             are another process's, which a tracer of this one does not
 *             count): "forked STATUS"
 *   "inmalloc" a new thread sleeps for good with an address inside libc's
 *             malloc on its stack, as a thread inside malloc would have
 *             (bpfjet's safe-point check is by address): "inmalloc"
 *   "sigsys"  a SIGSYS handler is installed (as a seccomp-trap user
 *             would): "sigsys"
 *   "rawclone" a thread made with a raw clone sharing the main thread's
 *             thread pointer (no CLONE_SETTLS) sleeps for good, in raw
 *             system calls (it must not touch libc's thread state):
 *             "rawclone"
 *   "sud"     the main thread turns Syscall User Dispatch on for itself,
 *             with a selector that always allows (a program using it for
 *             its own ends): "sud"
 *   "bench N" the main thread makes N getpid calls in a row: "ns WALL CPU",
 *             nanoseconds per call, wall clock and the thread's CPU time
 *             (scripts/bench-trace-pid.py)
 *   "exit"    "bye", exit status 7.
 * No other thread calls getpid, writes to PIPE_FD or reads READ_FD, so the
 * calls a tracer sees there are exactly these. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "raw_syscall.h"

#define WORKERS 3
#define PIPE_FD 100
#define READ_FD 101

static atomic_int generation;
static atomic_int finished;
static atomic_long writes, reads, getpids;
static int rounds;

static void rounds_of_calls(int n)
{
	char c = 'x';
	for (int i = 0; i < n; i++) {
		if (write(PIPE_FD, &c, 1) == 1)
			atomic_fetch_add(&writes, 1);
		if (read(READ_FD, &c, 1) == 1)
			atomic_fetch_add(&reads, 1);
		if (raw_syscall(SYS_getpid, 0, 0, 0) > 0)
			atomic_fetch_add(&getpids, 1);
	}
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
		rounds_of_calls(rounds);
		atomic_fetch_add(&finished, 1);
	}
	return NULL;
}

static void *spawned(void *arg)
{
	rounds_of_calls(*(int *)arg);
	return NULL;
}

static void *in_malloc(void *arg)
{
	/* What a frame returning into malloc leaves on the stack. */
	volatile uintptr_t ret = (uintptr_t)&malloc + 8;
	(void)arg;
	for (;;) {
		struct timespec ts = {1, 0};
		nanosleep(&ts, NULL);
		(void)ret;
	}
	return NULL;
}

static int raw_sleeper(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = {1, 0};
		long r;
		__asm__ volatile("syscall"
				 : "=a"(r)
				 : "0"(35L /* nanosleep */), "D"(&ts), "S"(0L)
				 : "rcx", "r11", "memory");
		(void)r;
	}
	return 0;
}

static void on_sigsys(int sig)
{
	(void)sig;
}

static void reset(void)
{
	atomic_store(&writes, 0);
	atomic_store(&reads, 0);
	atomic_store(&getpids, 0);
}

int main(void)
{
	int p[2];
	pthread_t t;
	char line[64];
	if (pipe(p) || dup2(p[1], PIPE_FD) < 0 || dup2(p[0], READ_FD) < 0)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&t, NULL, worker, NULL);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "go ", 3)) {
			struct timespec ts = {0, 1000000};
			reset();
			rounds = atoi(line + 3);
			atomic_store(&finished, 0);
			atomic_fetch_add(&generation, 1);
			while (atomic_load(&finished) < WORKERS)
				nanosleep(&ts, NULL);
			printf("done %ld %ld %ld\n", atomic_load(&writes), atomic_load(&reads),
			       atomic_load(&getpids));
		} else if (!strncmp(line, "spawn ", 6)) {
			int n = atoi(line + 6);
			reset();
			if (pthread_create(&t, NULL, spawned, &n) || pthread_join(t, NULL))
				return 4;
			printf("spawned %ld %ld %ld\n", atomic_load(&writes), atomic_load(&reads),
			       atomic_load(&getpids));
		} else if (!strncmp(line, "fork ", 5)) {
			int n = atoi(line + 5), status = -1;
			pid_t child = fork();
			if (child == 0) {
				for (int i = 0; i < n; i++)
					if (getpid() <= 0)
						_exit(1);
				_exit(0);
			}
			if (child < 0 || waitpid(child, &status, 0) != child)
				return 6;
			printf("forked %d\n", status);
		} else if (!strcmp(line, "inmalloc\n")) {
			if (pthread_create(&t, NULL, in_malloc, NULL))
				return 8;
			printf("inmalloc\n");
		} else if (!strcmp(line, "sigsys\n")) {
			signal(SIGSYS, on_sigsys);
			printf("sigsys\n");
		} else if (!strcmp(line, "rawclone\n")) {
			static char stack[65536] __attribute__((aligned(16)));
			if (clone(raw_sleeper, stack + sizeof stack,
				  CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
					  CLONE_THREAD | CLONE_SYSVSEM,
				  NULL) < 0)
				return 9;
			printf("rawclone\n");
		} else if (!strcmp(line, "sud\n")) {
			static volatile char allow = PR_SYS_DISPATCH_OFF;
			if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, 0, 0,
				  &allow))
				return 5;
			printf("sud\n");
		} else if (!strncmp(line, "bench ", 6)) {
			long n = atol(line + 6);
			struct timespec a, b, ca, cb;
			clock_gettime(CLOCK_MONOTONIC, &a);
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca);
			for (long i = 0; i < n; i++)
				getpid();
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb);
			clock_gettime(CLOCK_MONOTONIC, &b);
			printf("ns %.1f %.1f\n",
			       ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n,
			       ((cb.tv_sec - ca.tv_sec) * 1e9 + (cb.tv_nsec - ca.tv_nsec)) / n);
		} else if (!strcmp(line, "exit\n")) {
			printf("bye\n");
			return 7;
		}
	}
	return 3;
}
