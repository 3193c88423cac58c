// Which CPU ran the program, seen through the helper and a per-CPU map.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} runs_here SEC(".maps");

SEC("xdp")
int which_cpu(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u32 *runs = bpf_map_lookup_elem(&runs_here, &zero);
	if (runs)
		*runs += 1;
	return bpf_get_smp_processor_id();
}

char LICENSE[] SEC("license") = "GPL";
