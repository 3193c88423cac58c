// Map values with a struct bpf_spin_lock: the object exposes its offset.
// -DTWO_LOCKS (BTF the kernel refuses) and -DLRU_LOCK (a lock where the
// kernel supports none) build the odd placements.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct locked_late {
	__u64 stamp;
	struct bpf_spin_lock lock;
	__u32 count;
};

struct locked_first {
	struct bpf_spin_lock lock;
	__u32 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct locked_late);
} late SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct locked_first);
} first SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} plain SEC(".maps");

struct nested {
	__u64 a, b;
	struct locked_first in; /* the kernel finds locks in member structs too */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct nested);
} deep SEC(".maps");

#ifdef TWO_LOCKS
struct two {
	struct bpf_spin_lock a;
	struct bpf_spin_lock b;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct two);
} bad SEC(".maps");
#endif

#ifdef LRU_LOCK
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct locked_first);
} bad SEC(".maps");
#endif

SEC("xdp")
int prog(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct locked_late *v = bpf_map_lookup_elem(&late, &k);

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	v->count++;
	bpf_spin_unlock(&v->lock);
#if defined(TWO_LOCKS) || defined(LRU_LOCK)
	return bpf_map_lookup_elem(&bad, &k) ? XDP_DROP : XDP_PASS;
#else
	return bpf_map_lookup_elem(&first, &k) || bpf_map_lookup_elem(&plain, &k) ||
			       bpf_map_lookup_elem(&deep, &k)
		       ? XDP_DROP
		       : XDP_PASS;
#endif
}

char LICENSE[] SEC("license") = "GPL";
