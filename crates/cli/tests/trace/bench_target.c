/* Per-hit probe cost: calls a noinline function N times (argv[1]) in a
 * tight loop and prints the loop's nanoseconds per call. Run untraced,
 * under kernel uprobes and under bpfjet trace, the difference is the cost
 * of one probe hit. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long sink;

__attribute__((noinline)) long hit(long x)
{
	sink += x;
	return x;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		hit(i);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	printf("ns_per_call %.2f\n", ns / n);
	return 0;
}
