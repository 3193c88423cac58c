// SPDX-License-Identifier: GPL-2.0
/*
 * callback_unrolled: a known verification-scale gap of bpfjet's verifier
 * (docs/VERIFIER.md, "Known gap: unrolled search in a bpf_loop callback").
 *
 * The shape of eNetSTL's skip-list lookup (`__sl_get_lite_body`, called by
 * bpf_loop, with 64 hand-unrolled search steps) written with nothing but
 * the kernel's own helpers, so that the kernel's verifier can be asked:
 * each step looks a node up (an ARRAY map stands in for the node
 * pointers), compares its 32-byte key with __builtin_memcmp (clang expands
 * it into four 8-byte compares, each a branch), and either stops (found:
 * the 128-byte value copied out), goes down a level or moves right. The
 * loop context on the caller's stack carries the result and a first-call
 * flag across iterations, as eNetSTL's does.
 *
 * NBLK (1, 2, 4, 8, 16, 32 or 64) is the number of unrolled steps. The
 * kernel verifies every size in time linear in NBLK (6.18: ~4,400
 * instructions per step); bpfjet needs more than twice that from 16 steps
 * on and exceeds the 1M budget from 32. crates/verifier/tests/scale.rs
 * (`known_scale_gaps`) checks that the kernel accepts each build and
 * reports bpfjet's figures loudly.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifndef NBLK
#define NBLK 64
#endif

struct node {
	int height;
	char key[32];
	char val[128];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct node);
	__uint(max_entries, 4096);
} nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} elems SEC(".maps");

struct search_key {
	char bytes[32];
};

struct search_val {
	char bytes[128];
};

struct search_ctx {
	struct search_key *key;
	struct search_val *val;
	int res;
	int first;
};

static struct search_val found_val;

/* One search step: stop below level 0, look the next node up, compare. */
#define STEP(i)                                                                \
	if (level < 0)                                                         \
		goto out;                                                      \
	{                                                                      \
		__u32 k##i = (__u32)(cur * 16 + level) & 4095;                 \
		struct node *n##i = bpf_map_lookup_elem(&nodes, &k##i);        \
		if (!n##i) {                                                   \
			level -= 1;                                            \
			goto next##i;                                          \
		}                                                              \
		int cmp##i = __builtin_memcmp(n##i->key, key, sizeof(*key)); \
		if (cmp##i == 0) {                                             \
			res = 0;                                               \
			__builtin_memcpy(val, n##i->val, sizeof(*val));        \
			goto out;                                              \
		} else if (cmp##i > 0) {                                       \
			level -= 1;                                            \
		} else {                                                       \
			cur = k##i;                                            \
		}                                                              \
	}                                                                      \
	next##i:
#define STEP4(a) STEP(a##0) STEP(a##1) STEP(a##2) STEP(a##3)
#define STEP16(a) STEP4(a##0) STEP4(a##1) STEP4(a##2) STEP4(a##3)

static int search_body(__u32 index, void *data)
{
	struct search_ctx *c = data;
	struct search_key *key = c->key;
	struct search_val *val = c->val;
	int res = c->res;
	__u32 start = c->first ? 0 : 1;

	c->first = 0;
	struct node *head = bpf_map_lookup_elem(&nodes, &start);
	if (!head) {
		c->res = -1;
		return 1;
	}
	int level = head->height - 1;
	__u32 cur = start;
#if NBLK == 1
	STEP(1)
#elif NBLK == 2
	STEP(1) STEP(2)
#elif NBLK == 4
	STEP4(1)
#elif NBLK == 8
	STEP4(1) STEP4(2)
#else
	STEP16(1)
#endif
#if NBLK > 16
	STEP16(2)
#endif
#if NBLK > 32
	STEP16(3) STEP16(4)
#endif
out:
	c->res = res;
	return res == 0;
}

SEC("xdp")
int xdp_search(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u32 *n = bpf_map_lookup_elem(&elems, &zero);
	if (!n)
		return XDP_DROP;
	struct search_key k = {};
	*(__u64 *)&k = bpf_get_prandom_u32() & 4095;
	struct search_ctx sc = { .key = &k, .val = &found_val, .res = 1, .first = 1 };
	bpf_loop(*n + 32, search_body, &sc, 0);
	return sc.res == 0 ? XDP_TX : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
