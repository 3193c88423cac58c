// Reads the packet without checking data_end: the verifier must refuse it.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int unchecked_read(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	return data[20];
}

char LICENSE[] SEC("license") = "GPL";
