// SPDX-License-Identifier: Apache-2.0
// Global (non-static) functions through bpf(): the loader's func_info and
// BTF name them, and the kernel verifies each once, from its prototype.
// The default build loads on both sides and counts by EtherType in `seen`;
// -DUNCHECKED dereferences a pointer argument the prototype lets be NULL,
// which the kernel refuses (and so must bpfjet under exec).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct eth {
	__u8 dst[6], src[6];
	__u16 proto;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u16);
	__type(value, __u64);
} seen SEC(".maps");

__attribute__((noinline)) int proto_of(struct eth *e)
{
#ifndef UNCHECKED
	if (!e)
		return -1;
#endif
	return e->proto;
}

__attribute__((noinline)) int count(struct xdp_md *ctx, __u16 proto)
{
	__u64 one = 1, *n = bpf_map_lookup_elem(&seen, &proto);

	if (n) {
		*n += ctx->data_end - ctx->data;
		return 0;
	}
	return bpf_map_update_elem(&seen, &proto, &one, BPF_NOEXIST);
}

SEC("xdp")
int global_funcs(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	int proto;

	if (data + sizeof(struct eth) > (void *)(long)ctx->data_end)
		return XDP_PASS;
	proto = proto_of(data);
	if (proto < 0 || count(ctx, proto))
		return XDP_ABORTED;
	return proto == 0x0008 ? XDP_TX : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
