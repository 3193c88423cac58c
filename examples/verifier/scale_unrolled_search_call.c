// SPDX-License-Identifier: GPL-2.0
/*
 * scale_unrolled_search_call: 64 unrolled search steps (unrolled_search.h)
 * in a subprogram the XDP program calls once, eNetSTL's skip-list lookup
 * without its bpf_loop. The kernel needs ~39,000 instructions; bpfjet
 * exceeded the 1M budget while it made every spilled lookup key precise.
 */
#define NBLK 64
#define SEARCH_FN_ATTR __attribute__((noinline))
#include "unrolled_search.h"

SEC("xdp")
int xdp_search_call(struct xdp_md *ctx)
{
	return search_xdp();
}
