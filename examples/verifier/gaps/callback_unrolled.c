// SPDX-License-Identifier: GPL-2.0
/*
 * callback_unrolled: a known verification-scale gap of bpfjet's verifier
 * (docs/VERIFIER.md, "Known gap: an unrolled search in a bpf_loop
 * callback"): the unrolled search of ../unrolled_search.h called by
 * bpf_loop, exactly as eNetSTL's skip-list lookup calls its 64 steps.
 *
 * The kernel verifies it in time about linear in the steps (6.18: ~73,000,
 * ~115,000 and ~198,000 instructions for 16, 32 and 64 steps). bpfjet
 * needs ~3x that for 16 steps and exceeds its 1M budget from 32: paths
 * pruned against an earlier callback iteration leave the checkpoints
 * between them comparing every scalar exactly until that iteration is
 * explored. crates/verifier/tests/scale.rs (`known_scale_gaps`) checks
 * that the kernel accepts each build and reports bpfjet's figures.
 */
#ifndef NBLK
#define NBLK 64
#endif
#define SEARCH_FN_ATTR
#define SEARCH_BY_LOOP
#include "../unrolled_search.h"

SEC("xdp")
int xdp_search_loop(struct xdp_md *ctx)
{
	return search_xdp();
}
