// Global data: a .rodata knob set through STATE.json before load, and a
// .bss counter read back through the dump.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

const volatile __u32 verdict = XDP_PASS;
__u32 runs;

SEC("xdp")
int configured(struct xdp_md *ctx)
{
	runs++;
	return verdict;
}

char LICENSE[] SEC("license") = "GPL";
