// SPDX-License-Identifier: GPL-2.0
/*
 * icmp_echo: answer IPv4 ICMP echo requests from XDP.
 *
 * The reply is the request with MACs and addresses swapped, type 8 -> 0 and a
 * fresh TTL. Checksums are never recomputed over the payload:
 *  - swapping saddr/daddr does not change a one's-complement sum (addition is
 *    commutative), so only the TTL change touches the IP checksum; we rebuild it
 *    with bpf_csum_diff over the fixed 20-byte header;
 *  - the ICMP checksum is patched incrementally (RFC 1624) for the type word.
 * Anything else - including echo requests with IP options or fragmented ones -
 * goes to the stack.
 */
#include "common.h"

#define REPLY_TTL 64

struct echo_stats {
	__u64 replied;
	__u64 passed;
	__u64 bad_csum; /* requests whose IP header checksum did not verify */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct echo_stats);
} echo_stats SEC(".maps");

static __always_inline struct echo_stats *get_stats(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&echo_stats, &zero);
}

SEC("xdp")
int icmp_echo(struct xdp_md *ctx)
{
	struct echo_stats *st = get_stats();
	struct ethhdr *eth;
	struct iphdr *iph;
	struct icmphdr *icmph;
	struct cursor c;
	__u8 tmp_mac[ETH_ALEN];
	__be32 tmp_addr;
	__u16 old_w, new_w;
	__s64 sum;

	if (!st)
		return XDP_PASS;

	cursor_init(&c, ctx);
	if (parse_eth(&c, &eth) != bpf_htons(ETH_P_IP))
		goto pass;
	iph = parse_ipv4(&c);
	if (!iph || iph->ihl != 5 || iph->protocol != IPPROTO_ICMP)
		goto pass;
	if (iph->frag_off & bpf_htons(IP_MF_ | IP_OFFSET_))
		goto pass;
	icmph = c.pos;
	if ((void *)(icmph + 1) > c.end)
		goto pass;
	if (icmph->type != ICMP_ECHO || icmph->code != 0)
		goto pass;

	/* A sum over a valid header, checksum included, is 0xffff (folds to 0). */
	sum = bpf_csum_diff(NULL, 0, (__be32 *)iph, sizeof(*iph), 0);
	if (sum < 0 || csum_fold32(sum) != 0) {
		st->bad_csum++;
		goto pass;
	}

	mac_copy(tmp_mac, eth->h_dest);
	mac_copy(eth->h_dest, eth->h_source);
	mac_copy(eth->h_source, tmp_mac);

	tmp_addr = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = tmp_addr;
	iph->ttl = REPLY_TTL;
	iph->check = 0;
	sum = bpf_csum_diff(NULL, 0, (__be32 *)iph, sizeof(*iph), 0);
	if (sum < 0)
		goto pass;
	iph->check = csum_fold32(sum);

	/* type and code share the first 16-bit word of the ICMP header. */
	old_w = *(__u16 *)icmph;
	icmph->type = ICMP_ECHOREPLY;
	new_w = *(__u16 *)icmph;
	icmph->checksum = csum_replace2(icmph->checksum, old_w, new_w);

	st->replied++;
	return XDP_TX;
pass:
	st->passed++;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
