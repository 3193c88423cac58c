// Fixed verdicts and an in-place rewrite: the simplest oracle checks.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int xdp_drop(struct xdp_md *ctx)
{
	return XDP_DROP;
}

// Swap destination and source MAC addresses, as a reflector would.
SEC("xdp")
int swap_macs(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	unsigned char tmp;

	if (data + 12 > end)
		return XDP_ABORTED;
	for (int i = 0; i < 6; i++) {
		tmp = data[i];
		data[i] = data[i + 6];
		data[i + 6] = tmp;
	}
	return XDP_TX;
}

// Reports the context the test run was given.
SEC("xdp")
int rx_queue(struct xdp_md *ctx)
{
	return ctx->ingress_ifindex * 100 + ctx->rx_queue_index;
}

char LICENSE[] SEC("license") = "GPL";
