// SPDX-License-Identifier: GPL-2.0
/*
 * router_tailcall: an L3 dispatcher built from tail calls.
 *
 *   xdp_router --tail call--> handle_ipv4 : route lookup (LPM), TTL--, MAC rewrite, XDP_TX
 *              --tail call--> handle_ipv6 : walks extension headers with bpf_loop, counts
 *              --tail call--> handle_arp  : counts requests / replies
 *
 * The L3 offset found by the dispatcher travels to the handlers in a per-CPU
 * scratch slot: a tail call keeps only ctx, and re-parsing VLAN tags in every
 * handler is what the dispatcher is there to avoid.
 *
 * Also exercises bpf-to-bpf calls: forward_ipv4() and count() are real
 * subprograms (__noinline), copied by the loader into each program using them.
 */
#include "common.h"

enum slot { SLOT_IPV4 = 0, SLOT_IPV6 = 1, SLOT_ARP = 2, SLOT_MAX = 4 };

enum counter {
	C_DISPATCHED = 0,
	C_TAILCALL_MISS, /* slot empty: handler not installed */
	C_NON_L3,
	C_V4_FORWARDED,
	C_V4_NO_ROUTE,
	C_V4_TTL_EXCEEDED,
	C_V4_MALFORMED,
	C_V6_TCP,
	C_V6_UDP,
	C_V6_ICMP,
	C_V6_OTHER,
	C_V6_EXT_HDRS, /* extension headers walked */
	C_V6_MALFORMED,
	C_ARP_REQUEST,
	C_ARP_REPLY,
	C_ARP_OTHER,
	C_MAX,
};

#define ETH_P_ARP_ 0x0806
#define ARPOP_REQUEST_ 1
#define ARPOP_REPLY_ 2
#define MAX_L3_OFF (sizeof(struct ethhdr) + sizeof(struct vlan_hdr_))
#define MAX_EXT_HDRS 8
#define MAX_EXT_OFF 512 /* bytes of extension headers we are willing to walk */

struct arp_hdr_ {
	__be16 htype;
	__be16 ptype;
	__u8 hlen;
	__u8 plen;
	__be16 oper;
};

struct scratch {
	__u32 l3_off;
	__u32 pad;
};

struct route_v4_key {
	__u32 prefixlen;
	__be32 addr;
};

struct next_hop {
	__u8 dmac[ETH_ALEN];
	__u8 smac[ETH_ALEN];
	__u32 flags; /* reserved */
};

struct counter_val {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, struct counter_val);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
	__type(key, struct route_v4_key);
	__type(value, struct next_hop);
} routes_v4 SEC(".maps");

static __noinline int count(struct xdp_md *ctx, __u32 idx)
{
	struct counter_val *cv = bpf_map_lookup_elem(&counters, &idx);

	if (!cv)
		return -1;
	cv->packets++;
	cv->bytes += ctx->data_end - ctx->data;
	return 0;
}

/* Returns the L3 offset recorded by the dispatcher, or -1. */
static __always_inline int l3_offset(void)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (!s || s->l3_off > MAX_L3_OFF)
		return -1;
	return s->l3_off;
}

/* The heavy part of IPv4 forwarding, as a subprogram: LPM route lookup, TTL
 * decrement with an incremental checksum fix, next-hop MAC rewrite. */
static __noinline int forward_ipv4(struct xdp_md *ctx, __u32 l3_off)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct route_v4_key key = { .prefixlen = 32 };
	struct ethhdr *eth = data;
	struct iphdr *iph;
	struct next_hop *nh;
	__u16 old_w, new_w;

	if (l3_off > MAX_L3_OFF)
		return XDP_DROP;
	iph = data + l3_off;
	if ((void *)(eth + 1) > data_end || (void *)(iph + 1) > data_end)
		return XDP_DROP;
	if (iph->version != 4 || iph->ihl < 5) {
		count(ctx, C_V4_MALFORMED);
		return XDP_DROP;
	}
	if (iph->ttl <= 1) {
		count(ctx, C_V4_TTL_EXCEEDED);
		return XDP_PASS; /* the stack sends ICMP time exceeded */
	}

	key.addr = iph->daddr;
	nh = bpf_map_lookup_elem(&routes_v4, &key);
	if (!nh) {
		count(ctx, C_V4_NO_ROUTE);
		return XDP_PASS;
	}

	/* ttl and protocol share a 16-bit word of the header. */
	old_w = *(__u16 *)&iph->ttl;
	iph->ttl--;
	new_w = *(__u16 *)&iph->ttl;
	iph->check = csum_replace2(iph->check, old_w, new_w);

	mac_copy(eth->h_dest, nh->dmac);
	mac_copy(eth->h_source, nh->smac);
	count(ctx, C_V4_FORWARDED);
	return XDP_TX;
}

SEC("xdp")
int handle_ipv4(struct xdp_md *ctx)
{
	int off = l3_offset();

	if (off < 0)
		return XDP_DROP;
	return forward_ipv4(ctx, off);
}

struct ext_walk {
	struct xdp_md *ctx;
	__u32 off; /* offset of the header described by nexthdr */
	__u8 nexthdr;
	__u8 bad;
	__u8 walked;
};

/* bpf_loop callback: consume one extension header; 1 stops the loop. */
static long walk_one_ext(__u32 i, struct ext_walk *w)
{
	void *data = (void *)(long)w->ctx->data;
	void *data_end = (void *)(long)w->ctx->data_end;
	struct ipv6_opt_hdr *h;
	__u32 len;

	switch (w->nexthdr) {
	case IPPROTO_HOPOPTS:
	case IPPROTO_ROUTING:
	case IPPROTO_DSTOPTS:
	case IPPROTO_FRAGMENT:
	case IPPROTO_AH:
		break;
	default:
		return 1; /* reached the upper-layer header */
	}
	if (w->off > MAX_EXT_OFF) {
		w->bad = 1;
		return 1;
	}
	h = data + w->off;
	if ((void *)(h + 1) > data_end) {
		w->bad = 1;
		return 1;
	}
	if (w->nexthdr == IPPROTO_FRAGMENT)
		len = 8; /* fixed size; its second byte is reserved, not a length */
	else if (w->nexthdr == IPPROTO_AH)
		len = (h->hdrlen + 2) * 4;
	else
		len = (h->hdrlen + 1) * 8;
	/* The whole header must be in the frame, not just its first two bytes. */
	if ((void *)h + len > data_end) {
		w->bad = 1;
		return 1;
	}
	w->nexthdr = h->nexthdr;
	w->off += len;
	w->walked++;
	return 0;
}

SEC("xdp")
int handle_ipv6(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ext_walk w = { .ctx = ctx };
	struct ipv6hdr *ip6h;
	int off = l3_offset();
	__u32 idx;

	if (off < 0)
		return XDP_DROP;
	ip6h = data + off;
	if ((void *)(ip6h + 1) > data_end || ip6h->version != 6) {
		count(ctx, C_V6_MALFORMED);
		return XDP_DROP;
	}
	w.off = off + sizeof(*ip6h);
	w.nexthdr = ip6h->nexthdr;
	bpf_loop(MAX_EXT_HDRS, walk_one_ext, &w, 0);
	if (w.bad) {
		count(ctx, C_V6_MALFORMED);
		return XDP_DROP;
	}
	if (w.walked)
		count(ctx, C_V6_EXT_HDRS);

	switch (w.nexthdr) {
	case IPPROTO_TCP:
		idx = C_V6_TCP;
		break;
	case IPPROTO_UDP:
		idx = C_V6_UDP;
		break;
	case IPPROTO_ICMPV6:
		idx = C_V6_ICMP;
		break;
	default:
		idx = C_V6_OTHER;
	}
	count(ctx, idx);
	return XDP_PASS;
}

SEC("xdp")
int handle_arp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct arp_hdr_ *arp;
	int off = l3_offset();

	if (off < 0)
		return XDP_DROP;
	arp = data + off;
	if ((void *)(arp + 1) > data_end)
		return XDP_DROP;
	if (arp->oper == bpf_htons(ARPOP_REQUEST_))
		count(ctx, C_ARP_REQUEST);
	else if (arp->oper == bpf_htons(ARPOP_REPLY_))
		count(ctx, C_ARP_REPLY);
	else
		count(ctx, C_ARP_OTHER);
	return XDP_PASS;
}

/* Statically initialised: libbpf fills the slots at load time. A control plane
 * (or STATE.json's "prog" entries) can replace them. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, SLOT_MAX);
	/* Sizes, not BTF types: the kernel takes no BTF key/value for PROG_ARRAY. */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__array(values, int(struct xdp_md *));
} jmp_table SEC(".maps") = {
	.values = {
		[SLOT_IPV4] = (void *)&handle_ipv4,
		[SLOT_IPV6] = (void *)&handle_ipv6,
		[SLOT_ARP] = (void *)&handle_arp,
	},
};

SEC("xdp")
int xdp_router(struct xdp_md *ctx)
{
	struct scratch *s;
	struct cursor c;
	__u32 zero = 0;
	__be16 proto;
	__u32 slot;

	cursor_init(&c, ctx);
	proto = parse_eth(&c, NULL);
	if (proto == bpf_htons(ETH_P_IP))
		slot = SLOT_IPV4;
	else if (proto == bpf_htons(ETH_P_IPV6))
		slot = SLOT_IPV6;
	else if (proto == bpf_htons(ETH_P_ARP_))
		slot = SLOT_ARP;
	else {
		count(ctx, C_NON_L3);
		return proto ? XDP_PASS : XDP_DROP; /* 0: runt frame */
	}

	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return XDP_ABORTED;
	s->l3_off = c.pos - (void *)(long)ctx->data;
	count(ctx, C_DISPATCHED);

	bpf_tail_call(ctx, &jmp_table, slot);
	count(ctx, C_TAILCALL_MISS);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
