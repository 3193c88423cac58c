// SPDX-License-Identifier: GPL-2.0
/*
 * scale_unrolled_search: 32 unrolled search steps (unrolled_search.h)
 * inlined into the XDP program. Every step's lookup key is a spilled
 * scalar that is not a constant; the kernel (get_constant_map_key) makes
 * a key precise only when it is one, and needs ~4,700 instructions.
 * bpfjet made every spilled key precise and kept each step's paths apart
 * by the key's range: 325,701 instructions.
 */
#define NBLK 32
#define SEARCH_FN_ATTR __always_inline
#include "unrolled_search.h"

SEC("xdp")
int xdp_search_inline(struct xdp_md *ctx)
{
	return search_xdp();
}
