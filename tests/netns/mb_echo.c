/* The network function of afxdp_multibuf.sh: an xdp.frags echo. Swaps the
 * MACs in the linear part and writes a mark into the frame's last byte with
 * bpf_xdp_store_bytes (in the last fragment of a multi-buffer frame, at
 * the offset bpf_xdp_get_buff_len gives), so the peer can tell the frame
 * was run whole; the last length seen is kept in `lens`. Built with -DPLAIN it is the same in section "xdp"
 * (no frags), which the kernel refuses on an interface with a jumbo MTU. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 2);
} lens SEC(".maps");

#ifdef PLAIN
SEC("xdp")
#else
SEC("xdp.frags")
#endif
int mb_echo(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	unsigned char mac[6];
	__u32 k = 0;
	__u64 len = bpf_xdp_get_buff_len(ctx);
	unsigned char mark = 0xee;

	if (data + 14 > end)
		return XDP_DROP;
	bpf_map_update_elem(&lens, &k, &len, BPF_ANY);
	__builtin_memcpy(mac, data, 6);
	__builtin_memcpy(data, data + 6, 6);
	__builtin_memcpy(data + 6, mac, 6);
	if (bpf_xdp_store_bytes(ctx, len - 1, &mark, 1))
		return XDP_ABORTED;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
