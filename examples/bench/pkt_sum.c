/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * JIT code quality, loops over packet bytes: sum the first 64 bytes of the
 * packet SUM_PASSES times (the packet must be at least 64 bytes).
 */
#include "bench.h"

SEC("xdp")
int pkt_sum(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	__u32 sum = 0;

	if (data + 64 > end)
		return XDP_ABORTED;
	for (int pass = 0; pass < SUM_PASSES; pass++) {
#pragma clang loop unroll(disable)
		for (int i = 0; i < 64; i++)
			sum += data[i] ^ pass;
	}
	return sum == 1 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
