/* The traced program of the trace tests. Every count the tests expect is
 * a constant of this file:
 *   work:      WORK_CALLS direct calls + THREADS * THREAD_CALLS from threads
 *   lib_work:  LIB_CALLS through the PLT + 2 * LIB_CALLS from lib_outer
 *   rec:       rec(REC_DEPTH) makes REC_DEPTH + 1 calls, REC_ROUNDS times
 *   dive:      DIVE_ROUNDS * (DIVE_DEPTH + 1) calls, none returns (longjmp)
 *   write:     WRITES writes of 7 bytes to fd 77 (/dev/null), nothing else
 *   take_ptr:  called once with a pointer that is not mapped
 * Exit code 42. With argument "mark PATH" it first creates PATH (so a test
 * can tell whether main ran). */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORK_CALLS 1000
#define THREADS 8
#define THREAD_CALLS 5000
#define LIB_CALLS 300
#define REC_DEPTH 20
#define REC_ROUNDS 10
#define DIVE_DEPTH 6
#define DIVE_ROUNDS 25
#define WRITES 2000

int lib_work(int x);
int lib_outer(int x);

volatile int sink;

__attribute__((noinline)) int work(int x)
{
	sink += x;
	return x + 1;
}

__attribute__((noinline)) long rec(int n)
{
	if (n == 0)
		return 1;
	long r = rec(n - 1);
	sink += (int)r;
	return r + 1;
}

static jmp_buf escape;

__attribute__((noinline)) int dive(int n)
{
	if (n == 0)
		longjmp(escape, 1);
	int r = dive(n - 1);
	sink += r;
	return r + 1;
}

__attribute__((noinline)) long take_ptr(const long *p)
{
	/* Never dereferences p: only the probe reads it. A side effect keeps
	 * the call from being optimised away. */
	sink += p != 0;
	return p != 0;
}

static void *thread_main(void *arg)
{
	for (int i = 0; i < THREAD_CALLS; i++)
		work(i);
	return arg;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "mark") == 0) {
		int fd = open(argv[2], O_CREAT | O_WRONLY, 0644);
		close(fd);
	}
	for (int i = 0; i < WORK_CALLS; i++)
		work(i);
	for (int i = 0; i < LIB_CALLS; i++) {
		sink += lib_work(i);
		sink += lib_outer(i);
	}
	for (int r = 0; r < REC_ROUNDS; r++)
		rec(REC_DEPTH);
	for (int r = 0; r < DIVE_ROUNDS; r++)
		if (setjmp(escape) == 0)
			dive(DIVE_DEPTH);
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], 0, thread_main, 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], 0);
	int fd = open("/dev/null", O_WRONLY);
	dup2(fd, 77);
	for (int i = 0; i < WRITES; i++)
		if (write(77, "1234567", 7) != 7)
			return 1;
	take_ptr((const long *)0x10);
	return 42;
}
