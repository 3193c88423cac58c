/* Tail calls: `chain` tail-calls slot cfg.v[0] until the kernel's limit;
 * `miss` burns attempts on an empty slot first. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} jmp SEC(".maps");

__u64 runs;
__u64 misses;

SEC("xdp")
int chain(struct xdp_md *ctx)
{
	struct vals *c = get(&cfg);
	__sync_fetch_and_add(&runs, 1);
	if (!c)
		return XDP_ABORTED;
	for (int i = 0; i < 8; i++) {
		if (i >= c->v[1])
			break;
		bpf_tail_call(ctx, &jmp, 3);
		__sync_fetch_and_add(&misses, 1);
	}
	bpf_tail_call(ctx, &jmp, c->v[0]);
	return XDP_DROP;
}

SEC("xdp")
int other(struct xdp_md *ctx)
{
	return XDP_TX;
}
