/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Call cost (Demystifying eBPF performance): the same small step, a
 * multiply-xor on a value kept in a per-CPU slot, done CALLS times per
 * invocation as
 *   - one inlined function (`inlined`),
 *   - a bpf-to-bpf call each time (`bpf2bpf`),
 *   - a chain of tail calls (`tail_entry` -> `tail_step` x CALLS, the
 *     remaining count in the per-CPU slot).
 */
#include "bench.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[2]);
} call_state SEC(".maps");

int tail_step(struct xdp_md *ctx);

/* Slot 0 is the chain step, statically initialised (libbpf `.values`). */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__array(values, int(void *));
} call_chain SEC(".maps") = {
	.values = { [0] = (void *)&tail_step },
};

static __always_inline __u64 step_inline(__u64 x)
{
	return (x * 0x9e3779b97f4a7c15ULL) ^ (x >> 29);
}

static __noinline __u64 step_call(__u64 x)
{
	return (x * 0x9e3779b97f4a7c15ULL) ^ (x >> 29);
}

static __always_inline __u64 *state(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&call_state, &zero);
}

SEC("xdp")
int inlined(struct xdp_md *ctx)
{
	__u64 *s = state();
	if (!s)
		return XDP_ABORTED;
	__u64 x = s[0] | 1;
#pragma clang loop unroll(disable)
	for (int i = 0; i < CALLS; i++)
		x = step_inline(x);
	s[0] = x;
	return XDP_PASS;
}

SEC("xdp")
int bpf2bpf(struct xdp_md *ctx)
{
	__u64 *s = state();
	if (!s)
		return XDP_ABORTED;
	__u64 x = s[0] | 1;
#pragma clang loop unroll(disable)
	for (int i = 0; i < CALLS; i++)
		x = step_call(x);
	s[0] = x;
	return XDP_PASS;
}

SEC("xdp")
int tail_step(struct xdp_md *ctx)
{
	__u64 *s = state();
	if (!s)
		return XDP_ABORTED;
	s[0] = step_inline(s[0] | 1);
	if (s[1] == 0)
		return XDP_PASS;
	s[1] -= 1;
	bpf_tail_call(ctx, &call_chain, 0);
	return XDP_ABORTED;
}

SEC("xdp")
int tail_entry(struct xdp_md *ctx)
{
	__u64 *s = state();
	if (!s)
		return XDP_ABORTED;
	/* CALLS tail calls in all (the kernel allows 33 per run). */
	s[1] = CALLS - 1;
	bpf_tail_call(ctx, &call_chain, 0);
	return XDP_ABORTED;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
