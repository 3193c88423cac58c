// SPDX-License-Identifier: GPL-2.0
/*
 * scale_global_calls: one global function (a parser of a TLV option list,
 * 16 bounded steps, each a branch) called from 24 places of an XDP
 * program. The kernel verifies a global function once, from its BTF
 * prototype, and each call costs the caller one instruction; verified in
 * every caller's context, its body would be explored 24 times over.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define STEPS 16
#define CALLS 24

struct opts {
	__u8 bytes[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CALLS);
	__type(key, __u32);
	__type(value, struct opts);
} options SEC(".maps");

/* The sum of the option kinds up to the end marker (kind 0), each option
 * [kind, len, len - 2 bytes]. */
__attribute__((noinline)) int option_sum(struct opts *o)
{
	__u32 off = 0;
	int sum = 0;

	if (!o)
		return 0;
	for (int i = 0; i < STEPS; i++) {
		__u8 kind = o->bytes[off & 63], len = o->bytes[(off + 1) & 63];
		if (!kind)
			break;
		sum += kind;
		off += len < 2 ? 2 : len;
	}
	return sum;
}

SEC("xdp")
int xdp_global_calls(struct xdp_md *ctx)
{
	int total = 0;

#pragma unroll
	for (__u32 k = 0; k < CALLS; k++) {
		__u32 key = k;
		struct opts *o = bpf_map_lookup_elem(&options, &key);
		total += option_sum(o);
	}
	return total & 1 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
