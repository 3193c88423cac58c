/* The sampling test's target: the main thread, a second thread and a
 * forked child each burn CPU in spin() (called by work()) for a while and
 * print "cpu TID NS" (the thread's CPU time, CLOCK_THREAD_CPUTIME_ID, from
 * its start; a forked child's clock starts at the fork) on stderr, which the test compares with the samples. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) void spin(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * i;
}

__attribute__((noinline)) void work(unsigned long n)
{
	spin(n);
	sink++;
}

static long long thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The thread's CPU time since `from` (the main thread's own start-up, the
 * agent's loading, came before main). */
static void report(long long from)
{
	fprintf(stderr, "cpu %d %lld\n", gettid(), thread_cpu_ns() - from);
}

static unsigned long rounds;

static void *thread_main(void *arg)
{
	(void)arg;
	work(rounds);
	report(0);
	return NULL;
}

int main(int argc, char **argv)
{
	long long start = thread_cpu_ns();
	rounds = argc > 1 ? strtoul(argv[1], NULL, 0) : 100000000UL;
	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, NULL))
		return 1;
	pid_t child = fork();
	if (child == 0) {
		work(rounds);
		report(0);
		_exit(0);
	}
	work(rounds);
	report(start);
	pthread_join(t, NULL);
	int status;
	waitpid(child, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
