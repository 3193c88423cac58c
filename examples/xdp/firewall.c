// SPDX-License-Identifier: GPL-2.0
/*
 * firewall: drop traffic from blocked source prefixes (IPv4 and IPv6 LPM tries)
 * unless its exact 5-tuple is on the allowlist. Everything else passes.
 *
 * Order of checks: allowlist first, so an operator can punch a hole for one
 * flow (say a monitoring probe) through a blocked /8 without splitting the prefix.
 */
#include "common.h"

enum fw_verdict {
	FW_PASS_DEFAULT = 0, /* no rule matched */
	FW_PASS_ALLOWLIST, /* 5-tuple allowlisted (possibly inside a blocked prefix) */
	FW_DROP_BLOCKED, /* source inside a blocked prefix */
	FW_DROP_MALFORMED, /* truncated or inconsistent headers */
	FW_PASS_NON_IP, /* ARP, LLDP, ... */
	FW_VERDICTS,
};

struct lpm_v4_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct lpm_v6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct block_rule {
	__u32 rule_id;
	__u32 flags; /* reserved */
};

/* 5-tuple; IPv4 addresses occupy the first 4 bytes of saddr/daddr. */
struct fw_tuple {
	__u8 saddr[16];
	__u8 daddr[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family; /* 4 or 6: keeps v4 and v4-looking v6 tuples apart */
	__u8 pad[2];
};

struct verdict_count {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* required for LPM tries */
	__uint(max_entries, 16384);
	__type(key, struct lpm_v4_key);
	__type(value, struct block_rule);
} blocked_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct lpm_v6_key);
	__type(value, struct block_rule);
} blocked_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct fw_tuple);
	__type(value, __u64); /* hits */
} allowlist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_VERDICTS);
	__type(key, __u32);
	__type(value, struct verdict_count);
} verdicts SEC(".maps");

static __always_inline int account(struct xdp_md *ctx, __u32 verdict)
{
	struct verdict_count *vc = bpf_map_lookup_elem(&verdicts, &verdict);

	if (vc) {
		vc->packets++;
		vc->bytes += ctx->data_end - ctx->data;
	}
	return (verdict == FW_DROP_BLOCKED || verdict == FW_DROP_MALFORMED) ? XDP_DROP
									     : XDP_PASS;
}

/* Fills the ports; protocols without ports keep them zero. Returns -1 if truncated. */
static __always_inline int parse_ports(struct cursor *c, struct fw_tuple *t)
{
	if (t->proto == IPPROTO_TCP) {
		struct tcphdr *th = parse_tcp(c);

		if (!th)
			return -1;
		t->sport = th->source;
		t->dport = th->dest;
	} else if (t->proto == IPPROTO_UDP) {
		struct udphdr *uh = parse_udp(c);

		if (!uh)
			return -1;
		t->sport = uh->source;
		t->dport = uh->dest;
	}
	return 0;
}

SEC("xdp")
int firewall(struct xdp_md *ctx)
{
	struct fw_tuple t = {};
	struct cursor c;
	__u64 *hits;
	__be16 proto;
	int blocked;

	cursor_init(&c, ctx);
	proto = parse_eth(&c, NULL);
	if (!proto)
		return account(ctx, FW_DROP_MALFORMED);

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = parse_ipv4(&c);
		struct lpm_v4_key k4 = { .prefixlen = 32 };

		if (!iph)
			return account(ctx, FW_DROP_MALFORMED);
		t.family = 4;
		t.proto = iph->protocol;
		__builtin_memcpy(t.saddr, &iph->saddr, 4);
		__builtin_memcpy(t.daddr, &iph->daddr, 4);
		__builtin_memcpy(k4.addr, &iph->saddr, 4);
		/* Non-first fragments have no L4 header: match them on addresses only. */
		if (!(iph->frag_off & bpf_htons(IP_OFFSET_)) && parse_ports(&c, &t))
			return account(ctx, FW_DROP_MALFORMED);
		blocked = bpf_map_lookup_elem(&blocked_v4, &k4) != NULL;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = parse_ipv6(&c);
		struct lpm_v6_key k6 = { .prefixlen = 128 };

		if (!ip6h)
			return account(ctx, FW_DROP_MALFORMED);
		t.family = 6;
		t.proto = ip6h->nexthdr;
		__builtin_memcpy(t.saddr, &ip6h->saddr, 16);
		__builtin_memcpy(t.daddr, &ip6h->daddr, 16);
		__builtin_memcpy(k6.addr, &ip6h->saddr, 16);
		if (parse_ports(&c, &t))
			return account(ctx, FW_DROP_MALFORMED);
		blocked = bpf_map_lookup_elem(&blocked_v6, &k6) != NULL;
	} else {
		return account(ctx, FW_PASS_NON_IP);
	}

	hits = bpf_map_lookup_elem(&allowlist, &t);
	if (hits) {
		__sync_fetch_and_add(hits, 1);
		return account(ctx, FW_PASS_ALLOWLIST);
	}
	return account(ctx, blocked ? FW_DROP_BLOCKED : FW_PASS_DEFAULT);
}

char LICENSE[] SEC("license") = "GPL";
