// An ARRAY_OF_MAPS whose inner map comes from an `inner` STATE.json entry.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct inner_verdicts {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct inner_verdicts);
} tables SEC(".maps");

// tables[0][0] is the verdict; XDP_PASS without an inner map.
SEC("xdp")
int lookup_nested(struct xdp_md *ctx)
{
	__u32 zero = 0;
	void *inner = bpf_map_lookup_elem(&tables, &zero);
	if (!inner)
		return XDP_PASS;
	__u32 *verdict = bpf_map_lookup_elem(inner, &zero);
	if (!verdict)
		return XDP_ABORTED;
	return *verdict;
}

char LICENSE[] SEC("license") = "GPL";
