// Static and global subprograms with several call sites and nested calls,
// a bpf_loop callback, and two programs in one object sharing a subprogram,
// in `xdp.frags` and `xdp/custom` sections.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} counter SEC(".maps");

static __noinline int leaf(int x)
{
	return x * 3 + 1;
}

static __noinline int middle(int x)
{
	return leaf(x) + leaf(x + 1);
}

__noinline int shared_global(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&counter, &k);
	if (v)
		*v += 1;
	return middle(ctx->ingress_ifindex) & 1;
}

static int loop_cb(__u32 index, void *data)
{
	*(__u64 *)data += index;
	return 0;
}

SEC("xdp.frags")
int prog_frags(struct xdp_md *ctx)
{
	__u64 sum = 0;
	bpf_loop(8, loop_cb, &sum, 0);
	return shared_global(ctx) ? XDP_PASS : (int)(sum & 1);
}

SEC("xdp/custom")
int prog_custom(struct xdp_md *ctx)
{
	return shared_global(ctx) + leaf(2) > 5 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
