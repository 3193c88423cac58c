// An XDP program for the control-plane tests (`bpfjet exec`): counts
// packets by length in a hash map and drops those longer than the limit in
// an array map that the control plane sets; counts every packet in .bss.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} limit SEC(".maps");

/* Global data: libbpf maps .bss into the control plane (BPF_F_MMAPABLE). */
__u64 packets;

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 len = (__u32)(end - data), zero = 0;
	__u64 one = 1, *n = bpf_map_lookup_elem(&counts, &len);
	__u32 *max = bpf_map_lookup_elem(&limit, &zero);

	__sync_fetch_and_add(&packets, 1);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&counts, &len, &one, BPF_NOEXIST);
	if (max && *max && len > *max)
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
