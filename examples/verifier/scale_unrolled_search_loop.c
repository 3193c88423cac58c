// SPDX-License-Identifier: GPL-2.0
/*
 * scale_unrolled_search_loop: the unrolled search of unrolled_search.h
 * called by bpf_loop, exactly as eNetSTL's skip-list lookup calls its 64
 * steps. The kernel 6.18 verifies it with 198,322 instructions. bpfjet's
 * callback iterations converge against an earlier iteration still being
 * explored, which left the states between comparing every scalar exactly
 * (over the 1M budget from 32 steps) until optimistic pruning
 * (docs/VERIFIER.md, "Optimistic pruning"); crates/verifier/tests/scale.rs
 * holds it to the kernel-scale ratio.
 */
#ifndef NBLK
#define NBLK 64
#endif
#define SEARCH_FN_ATTR
#define SEARCH_BY_LOOP
#include "unrolled_search.h"

SEC("xdp")
int xdp_search_loop(struct xdp_md *ctx)
{
	return search_xdp();
}
