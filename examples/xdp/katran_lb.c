// SPDX-License-Identifier: GPL-2.0
/*
 * katran_lb: a Katran-class L4 load balancer.
 *
 *   Ethernet -> IPv4 | IPv6 -> TCP | UDP -> VIP lookup
 *     -> connection table (per-CPU LRU, fallback LRU)
 *     -> consistent-hashing ring on a miss -> real server
 *     -> IPIP / IP6IP6 / IPv4-in-IPv6 encapsulation -> XDP_TX
 *
 * Traffic that is not for a VIP goes to the stack (XDP_PASS); malformed IP
 * (truncated headers, IPv4 options, fragments) is dropped, as Katran does,
 * because the LB cannot hash it consistently.
 */
#include "common.h"

#define MAX_VIPS 32
#define CH_RING_SIZE 65537 /* prime, as in Maglev: every skip is a generator */
#define MAX_REALS 4096
#define MAX_CPUS 128
#define PER_CPU_LRU_SIZE 1000
#define FALLBACK_LRU_SIZE 1024
#define CTL_ARRAY_SIZE 16

/* ctl_array slots */
#define CTL_GW_MAC 0 /* outer destination MAC: the default gateway */
#define CTL_SRC_MAC 1 /* outer source MAC: this host's NIC */

/* vip_meta.flags */
#define F_HASH_NO_SRC_PORT (1U << 0) /* hash on the source address only (QUIC-style) */
#define F_LRU_BYPASS (1U << 1) /* never touch the connection table */

/* real_def.flags */
#define F_REAL_IPV6 (1U << 0)

/* stats slots after the per-VIP ones */
#define STATS_LRU (MAX_VIPS + 0) /* v1: connection-table lookups, v2: misses */
#define STATS_NEW_FLOW (MAX_VIPS + 1) /* v1: ring picks, v2: ring/real lookup failures */
#define STATS_ERRORS (MAX_VIPS + 2) /* v1: malformed drops, v2: encap failures */
#define STATS_NON_VIP (MAX_VIPS + 3) /* v1: packets passed, v2: bytes passed */
#define STATS_SIZE (MAX_VIPS + 4)

#define ENCAP_TTL 64
#define IPIP_SRC_PREFIX 0xAC100000U /* 172.16.0.0/16, low bits from the flow hash */
#define IP6IP6_SRC_PREFIX 0xFC000000U /* fc00::/8 ULA */
#define HASH_SEED 0x2ee1a5e5U

/* .rodata: the effective ring size. It is frozen at load time, so `% ring_size`
 * becomes a multiply-shift in any engine that folds constants from frozen maps. */
const volatile __u32 ring_size = CH_RING_SIZE;
/* .rodata feature flag: allow IPv4 VIP traffic to IPv6 reals. */
const volatile __u8 enable_v4_in_v6 = 1;

struct vip_key {
	__be32 addr[4]; /* IPv4 in addr[0], rest zero */
	__be16 port; /* 0 = any port */
	__u8 proto;
	__u8 pad;
};

struct vip_meta {
	__u32 flags;
	__u32 vip_num;
};

struct real_def {
	__be32 addr[4];
	__u8 flags;
	__u8 pad[3];
};

struct flow_key {
	__be32 src[4];
	__be32 dst[4];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct real_pos_lru {
	__u32 pos;
	__u32 pad;
	__u64 atime; /* UDP only: last packet time, for flow timeouts */
};

struct ctl_value {
	__u8 mac[ETH_ALEN];
	__u8 pad[2];
};

struct lb_stats {
	__u64 v1;
	__u64 v2;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 512);
	__type(key, struct vip_key);
	__type(value, struct vip_meta);
} vip_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_VIPS * CH_RING_SIZE);
	__type(key, __u32);
	__type(value, __u32); /* index into reals */
} ch_rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_REALS);
	__type(key, __u32);
	__type(value, struct real_def);
} reals SEC(".maps");

/* Inner map template. Flags stay 0 so a control plane can create compatible
 * inner maps from a plain {type, key_size, value_size, max_entries} spec. */
struct lru_inner {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PER_CPU_LRU_SIZE);
	__type(key, struct flow_key);
	__type(value, struct real_pos_lru);
};

/* One connection table per CPU, so the hot path never contends on LRU locks. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__array(values, struct lru_inner);
} lru_mapping SEC(".maps");

/* Used while the control plane has not installed this CPU's table yet. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FALLBACK_LRU_SIZE);
	__type(key, struct flow_key);
	__type(value, struct real_pos_lru);
} fallback_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STATS_SIZE);
	__type(key, __u32);
	__type(value, struct lb_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CTL_ARRAY_SIZE);
	__type(key, __u32);
	__type(value, struct ctl_value);
} ctl_array SEC(".maps");

struct packet_desc {
	struct flow_key flow;
	__u16 l3_len; /* inner packet length from the IP header, not the frame */
	__u8 tos;
	__u8 tcp_flags; /* byte 13 of the TCP header */
	__u8 is_ipv6;
};

#define TCP_FLAG_SYN 0x02

static __always_inline void stats_add(__u32 slot, __u64 v1, __u64 v2)
{
	struct lb_stats *s = bpf_map_lookup_elem(&stats, &slot);

	if (s) {
		s->v1 += v1;
		s->v2 += v2;
	}
}

/* Returns 0 on success, XDP_PASS for L4 we do not balance, XDP_DROP if malformed. */
static __always_inline int parse_l4(struct cursor *c, __u8 proto, struct packet_desc *pd)
{
	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = parse_tcp(c);

		if (!th)
			return XDP_DROP;
		pd->flow.sport = th->source;
		pd->flow.dport = th->dest;
		pd->tcp_flags = ((__u8 *)th)[13];
	} else if (proto == IPPROTO_UDP) {
		struct udphdr *uh = parse_udp(c);

		if (!uh)
			return XDP_DROP;
		pd->flow.sport = uh->source;
		pd->flow.dport = uh->dest;
	} else {
		return XDP_PASS;
	}
	pd->flow.proto = proto;
	return 0;
}

static __always_inline __u32 flow_hash(const struct packet_desc *pd, __u32 vip_flags)
{
	__u32 src = pd->is_ipv6 ? flow_hash_4w(pd->flow.src, HASH_SEED) : pd->flow.src[0];
	__u32 ports = ((__u32)pd->flow.sport << 16) | pd->flow.dport;

	if (vip_flags & F_HASH_NO_SRC_PORT)
		ports = pd->flow.dport;
	return flow_hash_3w(src, ports, pd->flow.proto, HASH_SEED);
}

static __always_inline void *connection_table(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	void *lru = bpf_map_lookup_elem(&lru_mapping, &cpu);

	return lru ? lru : (void *)&fallback_cache;
}

/* Picks the real for this flow: connection table first (except TCP SYN, which
 * always starts a new flow), then the ring. Returns NULL if nothing is configured. */
static __always_inline struct real_def *pick_real(struct packet_desc *pd,
						  const struct vip_meta *vip, __u32 hash)
{
	void *lru = connection_table();
	struct real_pos_lru *cached, fresh = {};
	__u32 *real_idx;
	__u32 key;
	int is_syn = pd->flow.proto == IPPROTO_TCP && (pd->tcp_flags & TCP_FLAG_SYN);

	if (!(vip->flags & F_LRU_BYPASS) && !is_syn) {
		cached = bpf_map_lookup_elem(lru, &pd->flow);
		if (cached) {
			if (pd->flow.proto == IPPROTO_UDP)
				cached->atime = bpf_ktime_get_ns();
			stats_add(STATS_LRU, 1, 0);
			return bpf_map_lookup_elem(&reals, &cached->pos);
		}
		stats_add(STATS_LRU, 1, 1);
	}

	key = vip->vip_num * ring_size + hash % ring_size;
	real_idx = bpf_map_lookup_elem(&ch_rings, &key);
	if (!real_idx) {
		stats_add(STATS_NEW_FLOW, 0, 1);
		return NULL;
	}
	stats_add(STATS_NEW_FLOW, 1, 0);

	if (!(vip->flags & F_LRU_BYPASS)) {
		fresh.pos = *real_idx;
		if (pd->flow.proto == IPPROTO_UDP)
			fresh.atime = bpf_ktime_get_ns();
		bpf_map_update_elem(lru, &pd->flow, &fresh, BPF_ANY);
	}
	return bpf_map_lookup_elem(&reals, real_idx);
}

static __always_inline int write_outer_eth(struct ethhdr *eth)
{
	__u32 k = CTL_GW_MAC;
	struct ctl_value *gw = bpf_map_lookup_elem(&ctl_array, &k);
	struct ctl_value *self;

	k = CTL_SRC_MAC;
	self = bpf_map_lookup_elem(&ctl_array, &k);
	if (!gw || !self)
		return -1;
	mac_copy(eth->h_dest, gw->mac);
	mac_copy(eth->h_source, self->mac);
	eth->h_proto = bpf_htons(ETH_P_IP);
	return 0;
}

/* IPv4 in IPv4 (RFC 2003). */
static __always_inline int encap_ipip(struct xdp_md *ctx, const struct packet_desc *pd,
				      const struct real_def *real, __u32 hash)
{
	struct ethhdr *eth;
	struct iphdr *iph;
	void *data, *data_end;

	if (bpf_xdp_adjust_head(ctx, 0 - (int)sizeof(struct iphdr)))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	iph = data + sizeof(*eth);
	if ((void *)(iph + 1) > data_end)
		return -1;
	if (write_outer_eth(eth))
		return -1;

	iph->version = 4;
	iph->ihl = 5;
	iph->tos = pd->tos;
	iph->tot_len = bpf_htons(pd->l3_len + sizeof(struct iphdr));
	iph->id = 0;
	iph->frag_off = 0;
	iph->ttl = ENCAP_TTL;
	iph->protocol = IPPROTO_IPIP;
	iph->check = 0;
	/* A synthetic source spreads encapsulated flows over the real's RSS queues. */
	iph->saddr = bpf_htonl(IPIP_SRC_PREFIX | (hash & 0xffff));
	iph->daddr = real->addr[0];
	iph->check = ipv4_hdr_csum(iph);
	return 0;
}

/* IPv6 outer header, inner being IPv6 (RFC 2473) or IPv4 (RFC 4213 style). */
static __always_inline int encap_ip6(struct xdp_md *ctx, const struct packet_desc *pd,
				     const struct real_def *real, __u32 hash)
{
	struct ethhdr *eth;
	struct ipv6hdr *ip6h;
	void *data, *data_end;
	__u16 payload_len = pd->l3_len;

	if (bpf_xdp_adjust_head(ctx, 0 - (int)sizeof(struct ipv6hdr)))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	ip6h = data + sizeof(*eth);
	if ((void *)(ip6h + 1) > data_end)
		return -1;
	if (write_outer_eth(eth))
		return -1;
	eth->h_proto = bpf_htons(ETH_P_IPV6);

	ip6h->version = 6;
	ip6h->priority = pd->tos >> 4;
	ip6h->flow_lbl[0] = ((pd->tos & 0x0f) << 4) | ((hash >> 16) & 0x0f);
	ip6h->flow_lbl[1] = hash >> 8;
	ip6h->flow_lbl[2] = hash;
	ip6h->payload_len = bpf_htons(payload_len);
	ip6h->nexthdr = pd->is_ipv6 ? IPPROTO_IPV6 : IPPROTO_IPIP;
	ip6h->hop_limit = ENCAP_TTL;
	ip6h->saddr.in6_u.u6_addr32[0] = bpf_htonl(IP6IP6_SRC_PREFIX);
	ip6h->saddr.in6_u.u6_addr32[1] = 0;
	ip6h->saddr.in6_u.u6_addr32[2] = 0;
	ip6h->saddr.in6_u.u6_addr32[3] = bpf_htonl(hash);
	__builtin_memcpy(&ip6h->daddr, real->addr, sizeof(real->addr));
	return 0;
}

SEC("xdp")
int katran_lb(struct xdp_md *ctx)
{
	struct packet_desc pd = {};
	struct vip_key vk = {};
	struct vip_meta *vip;
	struct real_def *real;
	struct cursor c;
	__u64 frame_len = ctx->data_end - ctx->data;
	__be16 proto;
	__u32 hash;
	int ret;

	cursor_init(&c, ctx);
	proto = parse_eth(&c, NULL);
	if (!proto)
		goto malformed;
	/* Encapsulation rewrites the first 14 bytes in place; tagged frames are
	 * left to the stack rather than losing their tag. */
	if (c.pos != (void *)(long)ctx->data + sizeof(struct ethhdr))
		goto pass;

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = parse_ipv4(&c);

		if (!iph)
			goto malformed;
		if (iph->ihl != 5)
			goto malformed; /* options: not supported by the LB */
		if (iph->frag_off & bpf_htons(IP_MF_ | IP_OFFSET_))
			goto malformed; /* fragments carry no (or partial) L4 ports */
		pd.flow.src[0] = iph->saddr;
		pd.flow.dst[0] = iph->daddr;
		pd.tos = iph->tos;
		pd.l3_len = bpf_ntohs(iph->tot_len);
		ret = parse_l4(&c, iph->protocol, &pd);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = parse_ipv6(&c);

		if (!ip6h)
			goto malformed;
		__builtin_memcpy(pd.flow.src, &ip6h->saddr, 16);
		__builtin_memcpy(pd.flow.dst, &ip6h->daddr, 16);
		pd.tos = (ip6h->priority << 4) | (ip6h->flow_lbl[0] >> 4);
		pd.l3_len = bpf_ntohs(ip6h->payload_len) + sizeof(struct ipv6hdr);
		pd.is_ipv6 = 1;
		/* Extension headers are not walked: such packets go to the stack. */
		ret = parse_l4(&c, ip6h->nexthdr, &pd);
	} else {
		goto pass;
	}
	if (ret == XDP_DROP)
		goto malformed;
	if (ret == XDP_PASS)
		goto pass;

	__builtin_memcpy(vk.addr, pd.flow.dst, sizeof(vk.addr));
	vk.port = pd.flow.dport;
	vk.proto = pd.flow.proto;
	vip = bpf_map_lookup_elem(&vip_map, &vk);
	if (!vip) {
		vk.port = 0; /* a VIP that balances every port */
		vip = bpf_map_lookup_elem(&vip_map, &vk);
		if (!vip)
			goto pass;
	}
	if (vip->vip_num >= MAX_VIPS)
		goto pass;

	stats_add(vip->vip_num, 1, frame_len);

	hash = flow_hash(&pd, vip->flags);
	real = pick_real(&pd, vip, hash);
	if (!real)
		return XDP_DROP;

	if (real->flags & F_REAL_IPV6) {
		if (!pd.is_ipv6 && !enable_v4_in_v6)
			return XDP_DROP;
		ret = encap_ip6(ctx, &pd, real, hash);
	} else {
		if (pd.is_ipv6)
			return XDP_DROP; /* IPv6 cannot ride in IPv4 here: misconfigured real */
		ret = encap_ipip(ctx, &pd, real, hash);
	}
	if (ret) {
		stats_add(STATS_ERRORS, 0, 1);
		return XDP_DROP;
	}
	return XDP_TX;

pass:
	stats_add(STATS_NON_VIP, 1, frame_len);
	return XDP_PASS;
malformed:
	stats_add(STATS_ERRORS, 1, 0);
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
