/* Per-hit USDT probe cost: fires a probe N times (argv[1]) in a tight loop
 * and prints the loop's nanoseconds per iteration (thread CPU time, as
 * bench_target.c, and wall clock). argv[2] picks the probe: "plain" (a
 * bare DTRACE_PROBE1: bpfjet patches its nop with a jump) or "guarded"
 * (behind its semaphore: the branch over the probe lands right after the
 * nop, so bpfjet uses an int3). Untraced, the guarded probe is skipped. */
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include <time.h>

unsigned short bench_plain_semaphore __attribute__((unused, section(".probes")));
unsigned short bench_guarded_semaphore __attribute__((unused, section(".probes")));
volatile long sink;

__attribute__((noinline)) static void plain(long n)
{
	for (long i = 0; i < n; i++) {
		DTRACE_PROBE1(bench, plain, i);
		sink += i;
	}
}

__attribute__((noinline)) static void guarded(long n)
{
	for (long i = 0; i < n; i++) {
		if (bench_guarded_semaphore)
			DTRACE_PROBE1(bench, guarded, i);
		sink += i;
	}
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int g = argc > 2 && strcmp(argv[2], "guarded") == 0;
	struct timespec a, b, wa, wb;
	clock_gettime(CLOCK_MONOTONIC, &wa);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	if (g)
		guarded(n);
	else
		plain(n);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	clock_gettime(CLOCK_MONOTONIC, &wb);
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	double wall = (wb.tv_sec - wa.tv_sec) * 1e9 + (wb.tv_nsec - wa.tv_nsec);
	printf("ns_per_call %.2f\n", ns / n);
	printf("wall_ns_per_call %.2f\n", wall / n);
	return 0;
}
