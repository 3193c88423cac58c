/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Variable-increment counting Bloom filter (VI-CBF, Rottenstreich, Kanizo
 * and Keslassy, INFOCOM'12) of flows seen: M 16-bit counters, K hashes.
 * Hash i of a flow picks counter h_i % M and an increment v_i from
 * D = {L, ..., 2L-1} (L = 4, from the hash's top bits). Inserting adds v_i
 * to each counter; a flow may be a member only if every counter equals v_i
 * or is at least v_i + L (a sum that includes v_i — fewer false positives
 * than a plain counting Bloom filter of the same memory). A member passes;
 * another flow is inserted (counters saturate at 0xffff) and goes out
 * again (XDP_TX: "first packet of a new flow"). A TCP packet of a member
 * with destination port 9 (discard) deletes it — counting filters exist
 * for deletion — and is dropped. A control plane reads the counters.
 *
 * Built twice: plain eBPF (table CRC32C) and with -DUSE_KFUNCS
 * (bpfjet_crc32c, compiled in as the crc32 instruction).
 */
#include "nf.h"
#ifdef USE_KFUNCS
#include "../../include/bpfjet_kfuncs.h"
#endif

#ifndef K
#define K 4
#endif
#define M 4096
#define L 4

struct counters {
	__u16 c[M];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
} counters SEC(".maps");

static const __u32 seeds[8] = {0x84222325, 0xcbf29ce4, 0x9e3779b9, 0x7f4a7c15,
			       0x85ebca6b, 0xc2b2ae35, 0x27d4eb2f, 0x165667b1};

static __always_inline __u32 flow_hash(const struct flow_key *k, __u32 seed)
{
#ifdef USE_KFUNCS
	return bpfjet_crc32c(k, FLOW_KEY_BYTES, seed);
#else
	return crc32c_plain((const __u8 *)k, seed);
#endif
}

SEC("xdp")
int vibloom(struct xdp_md *ctx)
{
	struct flow_key key;
	__u32 zero = 0;
	if (parse_flow(ctx, &key) < 0)
		return XDP_PASS;
	struct counters *t = bpf_map_lookup_elem(&counters, &zero);
	if (!t)
		return XDP_ABORTED;
	__u32 idx[K];
	__u32 inc[K];
	int member = 1;
#pragma unroll
	for (int i = 0; i < K; i++) {
		__u32 h = flow_hash(&key, seeds[i]);
		idx[i] = h % M;
		inc[i] = L + (h >> 30);
		__u32 c = t->c[idx[i]];
		if (c != inc[i] && c < inc[i] + L)
			member = 0;
	}
	if (member) {
		if (key.proto != IPPROTO_TCP || key.dport != bpf_htons(9))
			return XDP_PASS;
#pragma unroll
		for (int i = 0; i < K; i++) {
			__u32 c = t->c[idx[i] % M];
			/* A saturated counter stays: its true sum is unknown. */
			if (c != 0xffff)
				t->c[idx[i] % M] = c - inc[i];
		}
		return XDP_DROP;
	}
#pragma unroll
	for (int i = 0; i < K; i++) {
		__u32 c = t->c[idx[i] % M] + inc[i];
		t->c[idx[i] % M] = c > 0xffff ? 0xffff : c;
	}
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
