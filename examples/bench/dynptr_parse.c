/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A parser through dynptrs instead of direct packet access: Ethernet, IPv4
 * and UDP headers taken with bpf_dynptr_slice (each a kfunc call), a count
 * per destination port. Needs an Ethernet/IPv4/UDP frame.
 */
#include "bench.h"
#include <bpf_dynptr_kfuncs.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u64);
} ports SEC(".maps");

SEC("xdp")
int dynptr_parse(struct xdp_md *ctx)
{
	struct bpf_dynptr d;
	__u8 eth_buf[14], ip_buf[20], udp_buf[8];

	if (bpf_dynptr_from_xdp(ctx, 0, &d))
		return XDP_ABORTED;
	__u8 *eth = bpf_dynptr_slice(&d, 0, eth_buf, sizeof(eth_buf));
	if (!eth || eth[12] != 0x08 || eth[13] != 0x00)
		return XDP_PASS;
	__u8 *ip = bpf_dynptr_slice(&d, 14, ip_buf, sizeof(ip_buf));
	if (!ip || ip[9] != 17)
		return XDP_PASS;
	__u8 *udp = bpf_dynptr_slice(&d, 14 + (ip[0] & 0xf) * 4, udp_buf, sizeof(udp_buf));
	if (!udp)
		return XDP_PASS;
	__u32 port = udp[3];
	__u64 *c = bpf_map_lookup_elem(&ports, &port);
	if (c)
		(*c)++;
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
