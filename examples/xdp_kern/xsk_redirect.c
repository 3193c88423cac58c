// SPDX-License-Identifier: GPL-2.0
/*
 * xsk_redirect: the kernel half of `bpfjet run --iface`. Every frame that
 * arrives on a queue with a bpfjet AF_XDP socket goes to that socket; bpfjet
 * runs the network function in user space. Queues without a socket (and
 * every frame before the sockets are registered) stay in the kernel.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

SEC("xdp")
int xsk_redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

/* The same for an `xdp.frags` network function: loaded with
 * BPF_F_XDP_HAS_FRAGS, so the kernel attaches it to an interface whose MTU
 * needs multi-buffer frames and hands them to the socket (XDP_USE_SG). */
SEC("xdp.frags")
int xsk_redirect_frags(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
