// Array, hash and per-CPU array state: looked up and updated by the program.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} verdicts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} pcpu_bytes SEC(".maps");

// The first 4 packet bytes select a verdict in `verdicts` (XDP_PASS when
// absent); counters[verdict] and this CPU's pcpu_bytes[0] are bumped.
SEC("xdp")
int classify(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 key, verdict = XDP_PASS, zero = 0;

	if (data + 4 > end)
		return XDP_ABORTED;
	key = *(__u32 *)data;
	__u32 *v = bpf_map_lookup_elem(&verdicts, &key);
	if (v)
		verdict = *v;
	__u64 *count = bpf_map_lookup_elem(&counters, &verdict);
	if (count)
		*count += 1;
	__u64 *bytes = bpf_map_lookup_elem(&pcpu_bytes, &zero);
	if (bytes)
		*bytes += end - data;
	return verdict;
}

char LICENSE[] SEC("license") = "GPL";
