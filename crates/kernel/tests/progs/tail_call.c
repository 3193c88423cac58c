// A PROG_ARRAY filled through a `prog` entry, and a tail call through it.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} jump_table SEC(".maps");

SEC("xdp")
int dispatcher(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jump_table, 1);
	// Reached only when slot 1 is empty.
	return XDP_PASS;
}

SEC("xdp")
int dropper(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
