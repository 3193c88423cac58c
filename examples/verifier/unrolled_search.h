// SPDX-License-Identifier: GPL-2.0
/*
 * An unrolled search, the shape of eNetSTL's skip-list lookup
 * (`__sl_get_lite_body`: 64 hand-unrolled steps), written with nothing
 * but the kernel's own helpers so that the kernel's verifier can be asked
 * about it: each step looks a node up (an ARRAY map stands in for eNetSTL's
 * node pointers), compares its 32-byte key with __builtin_memcmp (clang
 * expands it into four 8-byte compares, each a branch) and either stops
 * (found: the 128-byte value copied out), goes down a level or moves
 * right. The search state a caller keeps across calls (result, first-call
 * flag) is in a context struct, as eNetSTL's bpf_loop context is.
 *
 * NBLK (1, 2, 4, 8, 16, 32 or 64) is the number of unrolled steps; the
 * includer defines SEARCH_FN_ATTR (how the search is compiled: inlined,
 * a subprogram, a bpf_loop callback, with SEARCH_BY_LOOP) and returns
 * search_xdp() from its XDP program.
 *
 * Used by examples/verifier/scale_unrolled_search*.c (the kernel-scale
 * test holds bpfjet to the kernel's cost) and
 * examples/verifier/gaps/callback_unrolled.c (a known gap).
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
	char bytes[32] __attribute__((aligned(8)));
};

struct search_val {
	char bytes[128] __attribute__((aligned(8)));
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

/* One search from the head node (0 on the first call, 1 after): the
 * result in the context, 1 (stop) when found. */
static SEARCH_FN_ATTR int search_body(__u32 index, void *data)
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

/*
 * The XDP program's body: a random key among the 4096 the map can hold,
 * one search through search_body (a bpf_loop over it when SEARCH_BY_LOOP
 * is defined, as eNetSTL runs it), XDP_TX when found.
 */
static __always_inline int search_xdp(void)
{
	__u32 zero = 0;
	__u32 *n = bpf_map_lookup_elem(&elems, &zero);
	if (!n)
		return XDP_DROP;
	struct search_key k;
	__builtin_memset(&k, 0, sizeof(k));
	*(__u64 *)&k = bpf_get_prandom_u32() & 4095;
	struct search_ctx sc = { .key = &k, .val = &found_val, .res = 1, .first = 1 };
#ifdef SEARCH_BY_LOOP
	bpf_loop(*n + 32, search_body, &sc, 0);
#else
	search_body(*n, &sc);
#endif
	return sc.res == 0 ? XDP_TX : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
