// BTF-defined maps of several types, a map-in-map with an inner template and
// static initialisation, and a PROG_ARRAY initialised with a program.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 128);
	__type(key, __u32);
	__type(value, __u64);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 16);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_BLOOM_FILTER);
	__uint(max_entries, 64);
	__type(value, __u32);
	__uint(map_extra, 3);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32);
	__type(key, __u64);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pinned_lru SEC(".maps");

struct inner_array {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} inner_a SEC(".maps"), inner_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct inner_array);
} outer SEC(".maps") = {
	.values = { [1] = &inner_b, [3] = &inner_a },
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 16);
	__type(key, __u32);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_HASH);
		__uint(max_entries, 10);
		__type(key, __u16);
		__type(value, __u64);
	});
} outer_hash SEC(".maps");

SEC("xdp")
int tail_target(struct xdp_md *ctx)
{
	return XDP_DROP;
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__uint(key_size, sizeof(__u32));
	__array(values, int (void *));
} jumps SEC(".maps") = {
	.values = { [1] = (void *)&tail_target },
};

SEC("xdp")
int use_maps(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&flows, &k);
	if (v)
		(*v)++;
	void *s = bpf_map_lookup_elem(&stats, &k);
	if (!s)
		return XDP_ABORTED;
	if (bpf_map_peek_elem(&seen, &k) == 0)
		return XDP_DROP;
	bpf_map_lookup_elem(&pinned_lru, &k);
	void *inner = bpf_map_lookup_elem(&outer, &k);
	if (inner)
		bpf_map_lookup_elem(inner, &k);
	inner = bpf_map_lookup_elem(&outer_hash, &k);
	if (inner)
		bpf_map_lookup_elem(inner, &k);
	bpf_tail_call(ctx, &jumps, 1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
