/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by the NF library examples: the 5-tuple key of a packet, and the
 * CRC32C (Castagnoli) register update the plain versions compute bit by bit
 * (bpfjet's bpfjet_crc32c computes the same register, no inversion).
 */
#ifndef BPFJET_NF_H
#define BPFJET_NF_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct flow_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 proto;
} __attribute__((packed));

#define FLOW_KEY_BYTES 13

/* The 5-tuple of an IPv4 TCP/UDP packet (ports 0 for other protocols);
 * -1 for anything else. */
static __always_inline int parse_flow(struct xdp_md *ctx, struct flow_key *k)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return -1;
	k->saddr = ip->saddr;
	k->daddr = ip->daddr;
	k->proto = ip->protocol;
	k->sport = 0;
	k->dport = 0;
	if (ip->ihl == 5 && (ip->protocol == IPPROTO_TCP || ip->protocol == IPPROTO_UDP)) {
		__u16 *ports = (void *)(ip + 1);
		if ((void *)(ports + 2) > end)
			return -1;
		k->sport = ports[0];
		k->dport = ports[1];
	}
	return 0;
}

static __always_inline __u32 crc32c_plain(const __u8 *p, __u32 c)
{
#pragma unroll
	for (int i = 0; i < FLOW_KEY_BYTES; i++) {
		c ^= p[i];
#pragma unroll
		for (int b = 0; b < 8; b++)
			c = (c >> 1) ^ (0x82f63b78 & -(c & 1));
	}
	return c;
}

#endif
