/* Per-hit probe cost: calls a noinline function N times (argv[1]) in a
 * tight loop and prints the loop's nanoseconds per call, as CPU time of the
 * calling thread (user + kernel: a kernel uprobe's trap is charged to the
 * thread, so both are compared on the time they take from it, whatever
 * else the machine runs) and as wall-clock time. Run untraced, under
 * kernel uprobes and under bpfjet trace, the difference is the cost of one
 * probe hit. With "short" as argv[2] it calls short_hit instead, a
 * function of one `ret`: too short for bpfjet's jump, so an int3. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long sink;

__attribute__((noinline)) long hit(long x)
{
	sink += x;
	return x;
}

__attribute__((noinline)) void short_hit(void)
{
	__asm__ volatile("");
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int short_fn = argc > 2 && argv[2][0] == 's';
	struct timespec a, b, wa, wb;
	clock_gettime(CLOCK_MONOTONIC, &wa);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	if (short_fn)
		for (long i = 0; i < n; i++)
			short_hit();
	else
		for (long i = 0; i < n; i++)
			hit(i);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	clock_gettime(CLOCK_MONOTONIC, &wb);
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	double wall = (wb.tv_sec - wa.tv_sec) * 1e9 + (wb.tv_nsec - wa.tv_nsec);
	printf("ns_per_call %.2f\n", ns / n);
	printf("wall_ns_per_call %.2f\n", wall / n);
	return 0;
}
