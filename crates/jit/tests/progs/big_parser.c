/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A ~2000-instruction XDP program for measuring JIT compile time
 * (crates/jit/benches/compile.rs): an Ethernet/IPv4/UDP parser followed by
 * a fully unrolled walk over up to 38 TLV records of the UDP payload, each
 * bounds-checked against data_end, classified by type, folded into a
 * running hash and counted in per-type slots of an array map. The shape
 * (long, branchy, many packet bounds checks and map accesses) is the one
 * real parsers give the optimizer.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define RECORDS 38

struct counters {
	__u64 seen[8];
	__u64 bytes[8];
	__u64 hash;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
} tlv_stats SEC(".maps");

SEC("xdp")
int big_parser(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;
	__u8 *p;
	__u32 zero = 0;
	__u64 hash = 0x9e3779b97f4a7c15ULL;
	struct counters *c;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->ihl != 5)
		return XDP_DROP;
	if (ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return XDP_DROP;
	c = bpf_map_lookup_elem(&tlv_stats, &zero);
	if (!c)
		return XDP_ABORTED;
	p = (void *)(udp + 1);
#pragma clang loop unroll(full)
	for (int i = 0; i < RECORDS; i++) {
		__u8 type, len;

		if ((void *)(p + 2) > data_end)
			break;
		type = p[0];
		len = p[1];
		if (type == 0)
			break;
		if (type == 1) {
			p += 1;
			continue;
		}
		if (len < 2 || len > 16)
			return XDP_DROP;
		if ((void *)(p + 4) > data_end)
			return XDP_DROP;
		hash ^= ((__u64)type << 8 | p[2]) * 0x100000001b3ULL;
		hash = (hash << 13 | hash >> 51) + p[3];
		c->seen[type & 7] += 1;
		c->bytes[type & 7] += len;
		if (type & 0x80)
			hash ^= bpf_ntohs(*(__u16 *)(p + 2));
		p += len;
	}
	c->hash ^= hash;
	return hash & 1 ? XDP_PASS : XDP_TX;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
