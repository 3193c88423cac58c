// A legacy `struct bpf_map_def` map in the `maps` section (libbpf < 1.0 style).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct bpf_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct bpf_map_def SEC("maps") legacy_counts = {
	.type = BPF_MAP_TYPE_PERCPU_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 256,
};

struct bpf_map_def SEC("maps") legacy_hash = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = 8,
	.value_size = 4,
	.max_entries = 1024,
	.map_flags = BPF_F_NO_PREALLOC,
};

SEC("xdp")
int legacy(struct xdp_md *ctx)
{
	__u32 k = 1;
	__u64 *v = bpf_map_lookup_elem(&legacy_counts, &k);
	if (v)
		*v += 1;
	__u64 hk = 2;
	return bpf_map_lookup_elem(&legacy_hash, &hk) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
