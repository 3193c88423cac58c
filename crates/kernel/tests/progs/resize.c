// Packet growth and shrinking, the cases where data_out's length changes.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// Prepend 16 bytes (an encapsulation header) filled with 0xee.
SEC("xdp")
int grow_head(struct xdp_md *ctx)
{
	if (bpf_xdp_adjust_head(ctx, -16))
		return XDP_ABORTED;
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	if (data + 16 > end)
		return XDP_ABORTED;
	for (int i = 0; i < 16; i++)
		data[i] = 0xee;
	return XDP_TX;
}

// Append 32 bytes and mark the last one (the tests send 64-byte packets).
SEC("xdp")
int grow_tail(struct xdp_md *ctx)
{
	if (bpf_xdp_adjust_tail(ctx, 32))
		return XDP_ABORTED;
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	if (data + 96 > end)
		return XDP_ABORTED;
	data[95] = 0x5a;
	return XDP_TX;
}

SEC("xdp")
int shrink_tail(struct xdp_md *ctx)
{
	if (bpf_xdp_adjust_tail(ctx, -4))
		return XDP_ABORTED;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
