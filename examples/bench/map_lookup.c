/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Map lookup cost (Demystifying eBPF performance, map access): LOOKUPS
 * lookups with 4-byte keys per invocation, driven by bpf_loop, on an ARRAY,
 * a HASH and an LRU_HASH. Keys cycle over the 256 entries present (the
 * harness fills the hash maps through --maps); the found values are summed
 * so no lookup can be dropped.
 */
#include "bench.h"

#define ENTRIES 256

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ENTRIES);
	__type(key, __u32);
	__type(value, __u64);
} bench_array SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ENTRIES);
	__type(key, __u32);
	__type(value, __u64);
} bench_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ENTRIES);
	__type(key, __u32);
	__type(value, __u64);
} bench_lru SEC(".maps");

struct acc {
	__u64 sum;
};

#define LOOKUP_CB(name, map)                                                  \
	static long name(__u32 i, struct acc *acc)                            \
	{                                                                      \
		__u32 key = i & (ENTRIES - 1);                                 \
		__u64 *v = bpf_map_lookup_elem(&map, &key);                    \
		if (v)                                                         \
			acc->sum += *v;                                        \
		return 0;                                                      \
	}

LOOKUP_CB(array_cb, bench_array)
LOOKUP_CB(hash_cb, bench_hash)
LOOKUP_CB(lru_cb, bench_lru)

static __always_inline int verdict(struct acc *acc)
{
	/* Never true for the benchmark state; keeps the sum alive. */
	return acc->sum == 1 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int array_lookup(struct xdp_md *ctx)
{
	struct acc acc = {};
	bpf_loop(LOOKUPS, array_cb, &acc, 0);
	return verdict(&acc);
}

SEC("xdp")
int hash_lookup(struct xdp_md *ctx)
{
	struct acc acc = {};
	bpf_loop(LOOKUPS, hash_cb, &acc, 0);
	return verdict(&acc);
}

SEC("xdp")
int lru_lookup(struct xdp_md *ctx)
{
	struct acc acc = {};
	bpf_loop(LOOKUPS, lru_cb, &acc, 0);
	return verdict(&acc);
}

/* The loop alone: bpf_loop with a callback that does no lookup. */
static long empty_cb(__u32 i, struct acc *acc)
{
	acc->sum ^= i;
	return 0;
}

SEC("xdp")
int loop_only(struct xdp_md *ctx)
{
	struct acc acc = {};
	bpf_loop(LOOKUPS, empty_cb, &acc, 0);
	return verdict(&acc);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
