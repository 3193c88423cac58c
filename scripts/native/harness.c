/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Runs a natively built NF function (scripts/bench-eiffel-native.sh) as
 * `bpfjet bench` runs a program with fresh packets: the original packet is
 * copied into the frame before every run. Prints ns per run for the NF and
 * for an empty function, median of the rounds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct xdp_md {
	uint64_t data, data_end;
};
int nf_entry(struct xdp_md *ctx);

__attribute__((noinline)) static int empty(struct xdp_md *ctx)
{
	asm volatile("" : : "r"(ctx) : "memory");
	return 2;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median_ns(int (*f)(struct xdp_md *), const unsigned char *orig, long iters, int rounds)
{
	unsigned char pkt[64];
	double r[64];
	unsigned sink = 0;
	for (int i = 0; i < rounds; i++) {
		double t0 = now();
		for (long n = 0; n < iters; n++) {
			memcpy(pkt, orig, 54);
			asm volatile("" : : "r"(pkt) : "memory");
			struct xdp_md x = {(uint64_t)pkt, (uint64_t)pkt + 54};
			sink += f(&x);
		}
		r[i] = (now() - t0) / iters;
	}
	if (sink == 1)
		puts("");
	qsort(r, rounds, sizeof(r[0]), cmp);
	return r[rounds / 2];
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 5000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 7;
	if (rounds < 1 || rounds > 64)
		rounds = 7;
	/* A 54-byte Ethernet/IPv4/UDP frame, as gen_nf_bench.py's flow. */
	unsigned char orig[54] = {0};
	orig[12] = 0x08, orig[14] = 0x45, orig[23] = 17;
	orig[26] = 10, orig[30] = 10, orig[33] = 1, orig[34] = 0x30, orig[36] = 0x50;
	double nf = median_ns(nf_entry, orig, iters, rounds);
	double e = median_ns(empty, orig, iters, rounds);
	printf("%.2f %.2f %.2f\n", nf, e, nf - e);
	return 0;
}
