// SPDX-License-Identifier: GPL-2.0
/*
 * katran_full: a fuller Katran-class L4 load balancer, written to exercise the
 * verifier with a program of several thousand instructions (the data-plane
 * corpus keeps the smaller katran_lb in examples/xdp).
 *
 *   Ethernet (+1 VLAN tag) -> IPv4 | IPv6
 *     -> decapsulation of IPIP / IP6IP6 / GUE packets sent to this host
 *        (health checks come back this way) -> XDP_PASS
 *     -> ICMP / ICMPv6 echo to a VIP -> reply in place -> XDP_TX
 *     -> ICMP "fragmentation needed" / ICMPv6 "packet too big" -> the
 *        embedded header names the flow -> same real as the flow
 *     -> TCP / UDP -> VIP lookup (HASH)
 *        -> QUIC short header on UDP/443: server id in the connection id
 *        -> connection table (per-CPU LRU in an ARRAY_OF_MAPS, fallback LRU)
 *        -> Maglev ring on a miss -> real server
 *     -> IPIP / IP6IP6 or GUE (UDP) encapsulation -> XDP_TX
 *   with per-VIP, per-real and global counters in PERCPU_ARRAYs.
 *
 * Everything is always_inline on purpose: one large function is what the
 * verifier has to walk.
 */
#include "common.h"
#include <linux/icmpv6.h>

#define MAX_VIPS 64
#define RING_SIZE 65537 /* prime: every Maglev skip generates the whole ring */
#define MAX_REALS 4096
#define MAX_SERVER_IDS 65536
#define MAX_CPUS 128
#define PER_CPU_LRU_SIZE 1000
#define FALLBACK_LRU_SIZE 1024

/* ctl_array slots */
#define CTL_GW_MAC 0
#define CTL_SRC_MAC 1
#define CTL_SIZE 4

/* vip_meta.flags */
#define F_HASH_NO_SRC_PORT (1U << 0)
#define F_LRU_BYPASS (1U << 1)
#define F_QUIC_VIP (1U << 2)
#define F_GUE_ENCAP (1U << 3)
#define F_NO_ICMP_ECHO (1U << 4)

/* real_def.flags */
#define F_REAL_IPV6 (1U << 0)

/* Global counter slots (in `lb_stats`, after the per-VIP ones). */
#define ST_LRU (MAX_VIPS + 0) /* v1 lookups, v2 misses */
#define ST_RING (MAX_VIPS + 1) /* v1 picks, v2 failures */
#define ST_ERRORS (MAX_VIPS + 2) /* v1 malformed, v2 encap failures */
#define ST_PASS (MAX_VIPS + 3) /* v1 packets, v2 bytes */
#define ST_ICMP (MAX_VIPS + 4) /* v1 echo replies, v2 too-big forwarded */
#define ST_QUIC (MAX_VIPS + 5) /* v1 routed by server id, v2 unknown id */
#define ST_DECAP (MAX_VIPS + 6) /* v1 v4 outer, v2 v6 outer */
#define ST_SIZE (MAX_VIPS + 7)

#define ENCAP_TTL 64
#define GUE_PORT 6080
#define QUIC_PORT 443
#define IPIP_SRC_PREFIX 0xAC100000U
#define IP6_SRC_PREFIX 0xFC000000U
#define HASH_SEED 0x5bd1e995U
#define TCP_FLAG_SYN 0x02
#define UDP_FLOW_TIMEOUT_NS (30ULL * 1000 * 1000 * 1000)

#ifndef IPPROTO_IPIP
#define IPPROTO_IPIP 4
#endif
#define ICMP6_ECHO_REQUEST 128
#define ICMP6_ECHO_REPLY 129
#define ICMP6_PKT_TOO_BIG 2

struct vip_key {
	__be32 addr[4];
	__be16 port;
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
	__u64 atime;
};

struct ctl_value {
	__u8 mac[ETH_ALEN];
	__u8 pad[2];
};

struct lb_stats {
	__u64 v1;
	__u64 v2;
};

struct decap_key {
	__be32 addr[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 512);
	__type(key, struct vip_key);
	__type(value, struct vip_meta);
} vip_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_VIPS * RING_SIZE);
	__type(key, __u32);
	__type(value, __u32);
} ch_rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_REALS);
	__type(key, __u32);
	__type(value, struct real_def);
} reals SEC(".maps");

struct lru_inner {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PER_CPU_LRU_SIZE);
	__type(key, struct flow_key);
	__type(value, struct real_pos_lru);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__array(values, struct lru_inner);
} lru_mapping SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FALLBACK_LRU_SIZE);
	__type(key, struct flow_key);
	__type(value, struct real_pos_lru);
} fallback_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ST_SIZE);
	__type(key, __u32);
	__type(value, struct lb_stats);
} lb_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_REALS);
	__type(key, __u32);
	__type(value, struct lb_stats);
} real_stats SEC(".maps");

/* QUIC server id -> index into `reals` (0 = not assigned). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SERVER_IDS);
	__type(key, __u32);
	__type(value, __u32);
} server_ids SEC(".maps");

/* Addresses of this host that tunnelled traffic (health checks) is sent to. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct decap_key);
	__type(value, __u32);
} decap_dst SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CTL_SIZE);
	__type(key, __u32);
	__type(value, struct ctl_value);
} ctl_array SEC(".maps");

struct packet_desc {
	struct flow_key flow;
	__u16 l3_len; /* length of the packet to encapsulate (inner IP header on) */
	__u8 tos;
	__u8 tcp_flags;
	__u8 is_ipv6;
	__u8 icmp_too_big; /* flow read from an ICMP error: never cached */
	__u8 pad[2];
};

/* Minimal GUE header (variant 0, no flags): what follows is an IP packet. */
struct guehdr_ {
	__u8 hlen_ctype; /* version 0, C 0, hlen 0 */
	__u8 proto;
	__be16 flags;
};

static __always_inline void stat_add(void *map, __u32 slot, __u64 v1, __u64 v2)
{
	struct lb_stats *s = bpf_map_lookup_elem(map, &slot);

	if (s) {
		s->v1 += v1;
		s->v2 += v2;
	}
}

/* ---- checksums ------------------------------------------------------------ */

static __always_inline __u32 csum_add_words(__u32 sum, const __be32 *w, int n)
{
#pragma unroll
	for (int i = 0; i < n; i++) {
		sum += w[i] >> 16;
		sum += w[i] & 0xffff;
	}
	return sum;
}

/* IPv6 pseudo-header + ICMPv6 message checksum adjustment for a type change
 * (echo request -> reply only changes the type byte; addresses swap, which
 * leaves the one's-complement sum unchanged). */
static __always_inline __u16 csum_type_change(__u16 check, __u8 old_t, __u8 new_t)
{
	return csum_replace2(check, bpf_htons((__u16)old_t << 8), bpf_htons((__u16)new_t << 8));
}

/* UDP checksum of the GUE header over IPv6: pseudo header + UDP header + GUE
 * header + the inner packet's words that the program can see bounded. The
 * inner payload is covered through bpf_csum_diff on up to 64 bytes and the
 * rest is left to checksum offload (the real accepts a zero checksum when the
 * payload is longer, RFC 6935). */
static __always_inline __u16 udp6_csum(const struct ipv6hdr *ip6h, const struct udphdr *uh,
				       const struct guehdr_ *gh, __u32 payload_sum)
{
	__u32 sum = 0;

	sum = csum_add_words(sum, ip6h->saddr.in6_u.u6_addr32, 4);
	sum = csum_add_words(sum, ip6h->daddr.in6_u.u6_addr32, 4);
	sum += bpf_htons(IPPROTO_UDP);
	sum += uh->len;
	sum += uh->source;
	sum += uh->dest;
	sum += uh->len;
	sum += ((const __u16 *)gh)[0];
	sum += ((const __u16 *)gh)[1];
	sum += payload_sum & 0xffff;
	sum += payload_sum >> 16;
	return csum_fold32(sum) ?: 0xffff;
}

/* ---- hashing -------------------------------------------------------------- */

static __always_inline __u32 flow_hash(const struct packet_desc *pd, __u32 vip_flags)
{
	__u32 src = pd->is_ipv6 ? flow_hash_4w(pd->flow.src, HASH_SEED) : pd->flow.src[0];
	__u32 ports = ((__u32)pd->flow.sport << 16) | pd->flow.dport;

	if (vip_flags & F_HASH_NO_SRC_PORT)
		ports = pd->flow.dport;
	return flow_hash_3w(src, ports, pd->flow.proto, HASH_SEED);
}

/* ---- L4 parsing ----------------------------------------------------------- */

/* 0 when the ports were read, XDP_PASS for other protocols, XDP_DROP if short. */
static __always_inline int parse_ports(struct cursor *c, __u8 proto, struct packet_desc *pd)
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
		if (bpf_ntohs(uh->len) < sizeof(*uh))
			return XDP_DROP;
		pd->flow.sport = uh->source;
		pd->flow.dport = uh->dest;
	} else {
		return XDP_PASS;
	}
	pd->flow.proto = proto;
	return 0;
}

/* The first 8 bytes of the transport header embedded in an ICMP error: the
 * flow is the reverse of the embedded packet (which the VIP sent). */
static __always_inline int parse_inner_ports(struct cursor *c, __u8 proto, struct packet_desc *pd)
{
	__be16 *ports = c->pos;

	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return XDP_PASS;
	if ((void *)(ports + 2) > c->end)
		return XDP_DROP;
	pd->flow.sport = ports[1];
	pd->flow.dport = ports[0];
	pd->flow.proto = proto;
	return 0;
}

/* ---- QUIC ------------------------------------------------------------------ */

/* Server id carried in the destination connection id of a QUIC short-header
 * packet. The first two bits of the CID name the encoding:
 *   v1: 16-bit id in the 14 bits after the version + 2 bits of the next byte
 *   v2: 24-bit id in bytes 1..3
 * Returns the id, 0 for long headers / unknown encodings (use the ring). */
static __always_inline __u32 quic_server_id(struct cursor *c)
{
	__u8 *q = c->pos;
	__u8 first, version;
	__u32 id;

	if ((void *)(q + 1) > c->end)
		return 0;
	first = q[0];
	if (first & 0x80)
		return 0; /* long header: handshake, not yet routed by id */
	if (!(first & 0x40))
		return 0; /* fixed bit clear: not QUIC */
	if ((void *)(q + 1 + 4) > c->end)
		return 0;
	version = q[1] >> 6;
	if (version == 1) {
		id = ((__u32)(q[1] & 0x3f) << 10) | ((__u32)q[2] << 2) | (q[3] >> 6);
	} else if (version == 2) {
		id = ((__u32)q[2] << 16) | ((__u32)q[3] << 8) | q[4];
	} else {
		return 0;
	}
	return id;
}

/* ---- connection table + ring ------------------------------------------------ */

static __always_inline void *connection_table(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	void *lru = bpf_map_lookup_elem(&lru_mapping, &cpu);

	return lru ? lru : (void *)&fallback_cache;
}

static __always_inline __u32 *ring_lookup(const struct vip_meta *vip, __u32 hash)
{
	__u32 key = vip->vip_num * RING_SIZE + hash % RING_SIZE;

	return bpf_map_lookup_elem(&ch_rings, &key);
}

/* Index of the real for this flow in *out; 0 on success. */
static __always_inline int pick_real(struct packet_desc *pd, const struct vip_meta *vip,
				     __u32 hash, __u32 *out)
{
	void *lru = connection_table();
	struct real_pos_lru *cached, fresh = {};
	__u32 *pos;
	int is_syn = pd->flow.proto == IPPROTO_TCP && (pd->tcp_flags & TCP_FLAG_SYN);
	int cacheable = !(vip->flags & F_LRU_BYPASS) && !pd->icmp_too_big;

	if (cacheable && !is_syn) {
		cached = bpf_map_lookup_elem(lru, &pd->flow);
		if (cached && pd->flow.proto == IPPROTO_UDP) {
			__u64 now = bpf_ktime_get_ns();

			/* UDP has no FIN: an idle entry is a new flow. */
			if (now - cached->atime > UDP_FLOW_TIMEOUT_NS)
				cached = NULL;
			else
				cached->atime = now;
		}
		if (cached) {
			stat_add(&lb_stats, ST_LRU, 1, 0);
			*out = cached->pos;
			return 0;
		}
		stat_add(&lb_stats, ST_LRU, 1, 1);
	}
	pos = ring_lookup(vip, hash);
	if (!pos || *pos == 0) {
		stat_add(&lb_stats, ST_RING, 0, 1);
		return -1;
	}
	stat_add(&lb_stats, ST_RING, 1, 0);
	if (cacheable) {
		fresh.pos = *pos;
		if (pd->flow.proto == IPPROTO_UDP)
			fresh.atime = bpf_ktime_get_ns();
		bpf_map_update_elem(lru, &pd->flow, &fresh, BPF_ANY);
	}
	*out = *pos;
	return 0;
}

/* ---- encapsulation ------------------------------------------------------- */

static __always_inline int write_outer_eth(struct ethhdr *eth, __be16 proto)
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
	eth->h_proto = proto;
	return 0;
}

static __always_inline void fill_ipv4(struct iphdr *iph, __u8 tos, __u16 tot_len, __u8 proto,
				      __be32 saddr, __be32 daddr)
{
	iph->version = 4;
	iph->ihl = 5;
	iph->tos = tos;
	iph->tot_len = bpf_htons(tot_len);
	iph->id = 0;
	iph->frag_off = bpf_htons(0x4000); /* DF: the path MTU is discovered by ICMP */
	iph->ttl = ENCAP_TTL;
	iph->protocol = proto;
	iph->check = 0;
	iph->saddr = saddr;
	iph->daddr = daddr;
	iph->check = ipv4_hdr_csum(iph);
}

static __always_inline void fill_ipv6(struct ipv6hdr *ip6h, __u8 tos, __u16 payload_len,
				      __u8 nexthdr, __u32 hash, const __be32 *daddr)
{
	ip6h->version = 6;
	ip6h->priority = tos >> 4;
	ip6h->flow_lbl[0] = ((tos & 0x0f) << 4) | ((hash >> 16) & 0x0f);
	ip6h->flow_lbl[1] = hash >> 8;
	ip6h->flow_lbl[2] = hash;
	ip6h->payload_len = bpf_htons(payload_len);
	ip6h->nexthdr = nexthdr;
	ip6h->hop_limit = ENCAP_TTL;
	ip6h->saddr.in6_u.u6_addr32[0] = bpf_htonl(IP6_SRC_PREFIX);
	ip6h->saddr.in6_u.u6_addr32[1] = 0;
	ip6h->saddr.in6_u.u6_addr32[2] = bpf_htonl(hash >> 8);
	ip6h->saddr.in6_u.u6_addr32[3] = bpf_htonl(hash);
	__builtin_memcpy(&ip6h->daddr, daddr, 16);
}

/* Sum of up to the first 64 bytes after `from` (what the verifier can bound). */
static __always_inline __u32 inner_sum(void *from, void *end)
{
	__u16 *w = from;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < 32; i++) {
		if ((void *)(w + i + 1) > end)
			break;
		sum += w[i];
	}
	return sum;
}

/* IPv4 outer header: IPIP (RFC 2003) or GUE over UDP. */
static __always_inline int encap_v4(struct xdp_md *ctx, const struct packet_desc *pd,
				    const struct real_def *real, __u32 hash, int gue)
{
	int extra = sizeof(struct iphdr) + (gue ? sizeof(struct udphdr) + sizeof(struct guehdr_) : 0);
	__be32 saddr = bpf_htonl(IPIP_SRC_PREFIX | (hash & 0xffff));
	struct ethhdr *eth;
	struct iphdr *iph;
	void *data, *data_end;

	if (bpf_xdp_adjust_head(ctx, 0 - extra))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	iph = data + sizeof(*eth);
	if ((void *)(iph + 1) > data_end)
		return -1;
	if (write_outer_eth(eth, bpf_htons(ETH_P_IP)))
		return -1;
	if (gue) {
		struct udphdr *uh = (void *)(iph + 1);
		struct guehdr_ *gh = (void *)(uh + 1);

		if ((void *)(gh + 1) > data_end)
			return -1;
		uh->source = bpf_htons(0xc000 | (hash & 0x3fff)); /* entropy for ECMP */
		uh->dest = bpf_htons(GUE_PORT);
		uh->len = bpf_htons(pd->l3_len + sizeof(*uh) + sizeof(*gh));
		uh->check = 0; /* optional over IPv4: only short packets get one */
		gh->hlen_ctype = 0;
		gh->proto = pd->is_ipv6 ? IPPROTO_IPV6 : IPPROTO_IPIP;
		gh->flags = 0;
		fill_ipv4(iph, pd->tos, pd->l3_len + extra, IPPROTO_UDP, saddr, real->addr[0]);
		if (pd->l3_len <= 64) {
			__u32 sum = inner_sum(gh + 1, data_end);

			sum += iph->saddr >> 16;
			sum += iph->saddr & 0xffff;
			sum += iph->daddr >> 16;
			sum += iph->daddr & 0xffff;
			sum += bpf_htons(IPPROTO_UDP);
			sum += uh->len + uh->source + uh->dest + uh->len;
			sum += ((__u16 *)gh)[0];
			sum += ((__u16 *)gh)[1];
			uh->check = csum_fold32(sum) ?: 0xffff;
		}
	} else {
		fill_ipv4(iph, pd->tos, pd->l3_len + extra, pd->is_ipv6 ? IPPROTO_IPV6 : IPPROTO_IPIP,
			  saddr, real->addr[0]);
	}
	return 0;
}

/* IPv6 outer header: IP6IP6 / IPv4-in-IPv6 (RFC 2473) or GUE over UDP. */
static __always_inline int encap_v6(struct xdp_md *ctx, const struct packet_desc *pd,
				    const struct real_def *real, __u32 hash, int gue)
{
	int extra = sizeof(struct ipv6hdr) + (gue ? sizeof(struct udphdr) + sizeof(struct guehdr_) : 0);
	struct ethhdr *eth;
	struct ipv6hdr *ip6h;
	void *data, *data_end;
	__u8 inner = pd->is_ipv6 ? IPPROTO_IPV6 : IPPROTO_IPIP;

	if (bpf_xdp_adjust_head(ctx, 0 - extra))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	ip6h = data + sizeof(*eth);
	if ((void *)(ip6h + 1) > data_end)
		return -1;
	if (write_outer_eth(eth, bpf_htons(ETH_P_IPV6)))
		return -1;
	if (gue) {
		struct udphdr *uh = (void *)(ip6h + 1);
		struct guehdr_ *gh = (void *)(uh + 1);
		__u16 udp_len = pd->l3_len + sizeof(*uh) + sizeof(*gh);

		if ((void *)(gh + 1) > data_end)
			return -1;
		fill_ipv6(ip6h, pd->tos, udp_len, IPPROTO_UDP, hash, real->addr);
		uh->source = bpf_htons(0xc000 | (hash & 0x3fff));
		uh->dest = bpf_htons(GUE_PORT);
		uh->len = bpf_htons(udp_len);
		uh->check = 0;
		gh->hlen_ctype = 0;
		gh->proto = inner;
		gh->flags = 0;
		/* Short packets get a full checksum; longer ones rely on RFC 6935. */
		if (pd->l3_len <= 64) {
			__u32 psum = inner_sum(gh + 1, data_end);

			uh->check = udp6_csum(ip6h, uh, gh, psum);
		}
	} else {
		fill_ipv6(ip6h, pd->tos, pd->l3_len, inner, hash, real->addr);
	}
	return 0;
}

/* ---- decapsulation ------------------------------------------------------- */

/* Strip `outer` bytes after the Ethernet header, keeping the MACs, and set
 * the EtherType of what is now right after it. */
static __always_inline int strip_outer(struct xdp_md *ctx, int outer, __be16 inner_proto)
{
	struct ethhdr *old_eth, *eth;
	struct ethhdr copy;
	void *data, *data_end;

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	old_eth = data;
	if ((void *)(old_eth + 1) > data_end)
		return -1;
	__builtin_memcpy(&copy, old_eth, sizeof(copy));
	if (bpf_xdp_adjust_head(ctx, outer))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(eth->h_dest, copy.h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_source, copy.h_source, ETH_ALEN);
	eth->h_proto = inner_proto;
	return 0;
}

static __always_inline int is_decap_dst(const __be32 *addr, int v6)
{
	struct decap_key k = {};

	if (v6)
		__builtin_memcpy(k.addr, addr, 16);
	else
		k.addr[0] = addr[0];
	return bpf_map_lookup_elem(&decap_dst, &k) != NULL;
}

/* A GUE packet: returns the inner IP protocol number or 0 if it is not one. */
static __always_inline __u8 gue_inner(struct cursor *c)
{
	struct udphdr *uh = c->pos;
	struct guehdr_ *gh = (void *)(uh + 1);

	if ((void *)(gh + 1) > c->end)
		return 0;
	if (uh->dest != bpf_htons(GUE_PORT))
		return 0;
	if (gh->hlen_ctype != 0)
		return 0; /* options or control messages: leave to the stack */
	if (gh->proto != IPPROTO_IPIP && gh->proto != IPPROTO_IPV6)
		return 0;
	return gh->proto;
}

/* Returns XDP_PASS after decapsulating, -1 when the packet is not a tunnel
 * packet for this host, XDP_DROP when decapsulation failed. */
static __always_inline int try_decap(struct xdp_md *ctx, struct cursor *c, __u8 proto,
				     const __be32 *daddr, int v6, __u64 frame_len)
{
	int outer = v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr);
	__u8 inner = 0;

	if (proto == IPPROTO_IPIP || proto == IPPROTO_IPV6) {
		inner = proto;
	} else if (proto == IPPROTO_UDP) {
		inner = gue_inner(c);
		outer += sizeof(struct udphdr) + sizeof(struct guehdr_);
	}
	if (!inner)
		return -1;
	if (!is_decap_dst(daddr, v6))
		return -1;
	if (strip_outer(ctx, outer, inner == IPPROTO_IPV6 ? bpf_htons(ETH_P_IPV6) : bpf_htons(ETH_P_IP)))
		return XDP_DROP;
	stat_add(&lb_stats, ST_DECAP, v6 ? 0 : 1, v6 ? 1 : 0);
	return XDP_PASS;
}

/* ---- ICMP ------------------------------------------------------------------ */

static __always_inline int vip_exists(const __be32 *addr, int v6)
{
	struct vip_key k = {};
	struct vip_meta *m;

	if (v6)
		__builtin_memcpy(k.addr, addr, 16);
	else
		k.addr[0] = addr[0];
	/* Echo is answered for any-port VIPs of either protocol. */
	k.proto = IPPROTO_TCP;
	m = bpf_map_lookup_elem(&vip_map, &k);
	if (!m) {
		k.proto = IPPROTO_UDP;
		m = bpf_map_lookup_elem(&vip_map, &k);
	}
	return m && !(m->flags & F_NO_ICMP_ECHO);
}

static __always_inline void swap_macs(struct ethhdr *eth)
{
	__u8 tmp[ETH_ALEN];

	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
}

/* ICMPv4: echo to a VIP is answered; "fragmentation needed" is routed by the
 * embedded header. Returns a verdict, or -1 with *pd filled to route. */
static __always_inline int handle_icmp4(struct cursor *c, struct ethhdr *eth, struct iphdr *iph,
					struct packet_desc *pd)
{
	struct icmphdr *ih = c->pos;
	struct iphdr *inner;

	if ((void *)(ih + 1) > c->end)
		return XDP_DROP;
	c->pos = ih + 1;
	if (ih->type == ICMP_ECHO && ih->code == 0) {
		__be32 tmp;

		if (!vip_exists(&iph->daddr, 0))
			return XDP_PASS;
		tmp = iph->saddr;
		iph->saddr = iph->daddr;
		iph->daddr = tmp;
		iph->ttl = ENCAP_TTL;
		iph->check = 0;
		iph->check = ipv4_hdr_csum(iph);
		ih->type = ICMP_ECHOREPLY;
		ih->checksum = csum_type_change(ih->checksum, ICMP_ECHO, ICMP_ECHOREPLY);
		swap_macs(eth);
		stat_add(&lb_stats, ST_ICMP, 1, 0);
		return XDP_TX;
	}
	if (ih->type != ICMP_DEST_UNREACH || ih->code != ICMP_FRAG_NEEDED)
		return XDP_PASS;
	inner = c->pos;
	if ((void *)(inner + 1) > c->end)
		return XDP_DROP;
	if (inner->version != 4 || inner->ihl != 5)
		return XDP_DROP;
	c->pos = inner + 1;
	pd->flow.src[0] = inner->daddr;
	pd->flow.dst[0] = inner->saddr;
	pd->icmp_too_big = 1;
	return parse_inner_ports(c, inner->protocol, pd) ?: -1;
}

static __always_inline int handle_icmp6(struct cursor *c, struct ethhdr *eth,
					struct ipv6hdr *ip6h, struct packet_desc *pd)
{
	struct icmp6hdr *ih = c->pos;
	struct ipv6hdr *inner;

	if ((void *)(ih + 1) > c->end)
		return XDP_DROP;
	c->pos = ih + 1;
	if (ih->icmp6_type == ICMP6_ECHO_REQUEST && ih->icmp6_code == 0) {
		struct in6_addr tmp;

		if (!vip_exists(ip6h->daddr.in6_u.u6_addr32, 1))
			return XDP_PASS;
		__builtin_memcpy(&tmp, &ip6h->saddr, sizeof(tmp));
		__builtin_memcpy(&ip6h->saddr, &ip6h->daddr, sizeof(tmp));
		__builtin_memcpy(&ip6h->daddr, &tmp, sizeof(tmp));
		ip6h->hop_limit = ENCAP_TTL;
		ih->icmp6_type = ICMP6_ECHO_REPLY;
		ih->icmp6_cksum = csum_type_change(ih->icmp6_cksum, ICMP6_ECHO_REQUEST, ICMP6_ECHO_REPLY);
		swap_macs(eth);
		stat_add(&lb_stats, ST_ICMP, 1, 0);
		return XDP_TX;
	}
	if (ih->icmp6_type != ICMP6_PKT_TOO_BIG)
		return XDP_PASS;
	inner = c->pos;
	if ((void *)(inner + 1) > c->end)
		return XDP_DROP;
	if (inner->version != 6)
		return XDP_DROP;
	c->pos = inner + 1;
	__builtin_memcpy(pd->flow.src, &inner->daddr, 16);
	__builtin_memcpy(pd->flow.dst, &inner->saddr, 16);
	pd->icmp_too_big = 1;
	return parse_inner_ports(c, inner->nexthdr, pd) ?: -1;
}

/* ---- L3 ---------------------------------------------------------------------- */

/* Fills *pd from an IPv4 packet; returns -1 to continue balancing, or a verdict. */
static __always_inline int process_v4(struct xdp_md *ctx, struct cursor *c, struct ethhdr *eth,
				      struct packet_desc *pd, __u64 frame_len)
{
	struct iphdr *iph = parse_ipv4(c);
	int ret;

	if (!iph)
		return XDP_DROP;
	if (iph->ihl != 5)
		return XDP_DROP;
	if (iph->frag_off & bpf_htons(IP_MF_ | IP_OFFSET_))
		return XDP_DROP;
	pd->tos = iph->tos;
	pd->l3_len = bpf_ntohs(iph->tot_len);
	ret = try_decap(ctx, c, iph->protocol, &iph->daddr, 0, frame_len);
	if (ret >= 0)
		return ret;
	if (iph->protocol == IPPROTO_ICMP)
		return handle_icmp4(c, eth, iph, pd);
	pd->flow.src[0] = iph->saddr;
	pd->flow.dst[0] = iph->daddr;
	ret = parse_ports(c, iph->protocol, pd);
	return ret ?: -1;
}

static __always_inline int process_v6(struct xdp_md *ctx, struct cursor *c, struct ethhdr *eth,
				      struct packet_desc *pd, __u64 frame_len)
{
	struct ipv6hdr *ip6h = parse_ipv6(c);
	int ret;

	if (!ip6h)
		return XDP_DROP;
	pd->is_ipv6 = 1;
	pd->tos = (ip6h->priority << 4) | (ip6h->flow_lbl[0] >> 4);
	pd->l3_len = bpf_ntohs(ip6h->payload_len) + sizeof(struct ipv6hdr);
	ret = try_decap(ctx, c, ip6h->nexthdr, ip6h->daddr.in6_u.u6_addr32, 1, frame_len);
	if (ret >= 0)
		return ret;
	if (ip6h->nexthdr == IPPROTO_ICMPV6)
		return handle_icmp6(c, eth, ip6h, pd);
	__builtin_memcpy(pd->flow.src, &ip6h->saddr, 16);
	__builtin_memcpy(pd->flow.dst, &ip6h->daddr, 16);
	ret = parse_ports(c, ip6h->nexthdr, pd);
	return ret ?: -1;
}

/* ---- the program ------------------------------------------------------------ */

SEC("xdp")
int katran_full(struct xdp_md *ctx)
{
	struct packet_desc pd = {};
	struct vip_key vk = {};
	struct vip_meta *vip;
	struct real_def *real;
	struct cursor c;
	struct ethhdr *eth = NULL;
	__u64 frame_len = ctx->data_end - ctx->data;
	__u32 hash, real_idx = 0, sid;
	__be16 proto;
	int ret;

	cursor_init(&c, ctx);
	proto = parse_eth(&c, &eth);
	if (!proto || !eth)
		goto malformed;
	/* Encapsulation rewrites the first 14 bytes: tagged frames go to the stack. */
	if (c.pos != (void *)(long)ctx->data + sizeof(struct ethhdr))
		goto pass;

	if (proto == bpf_htons(ETH_P_IP))
		ret = process_v4(ctx, &c, eth, &pd, frame_len);
	else if (proto == bpf_htons(ETH_P_IPV6))
		ret = process_v6(ctx, &c, eth, &pd, frame_len);
	else
		goto pass;
	if (ret == XDP_DROP)
		goto malformed;
	if (ret == XDP_PASS)
		goto pass;
	if (ret >= 0)
		return ret;

	__builtin_memcpy(vk.addr, pd.flow.dst, sizeof(vk.addr));
	vk.port = pd.flow.dport;
	vk.proto = pd.flow.proto;
	vip = bpf_map_lookup_elem(&vip_map, &vk);
	if (!vip) {
		vk.port = 0;
		vip = bpf_map_lookup_elem(&vip_map, &vk);
		if (!vip)
			goto pass;
	}
	if (vip->vip_num >= MAX_VIPS)
		goto pass;
	stat_add(&lb_stats, vip->vip_num, 1, frame_len);
	if (pd.icmp_too_big)
		stat_add(&lb_stats, ST_ICMP, 0, 1);

	hash = flow_hash(&pd, vip->flags);
	sid = 0;
	if ((vip->flags & F_QUIC_VIP) && pd.flow.proto == IPPROTO_UDP &&
	    pd.flow.dport == bpf_htons(QUIC_PORT) && !pd.icmp_too_big) {
		sid = quic_server_id(&c);
		if (sid) {
			__u32 *idx = bpf_map_lookup_elem(&server_ids, &sid);

			if (idx && *idx) {
				real_idx = *idx;
				stat_add(&lb_stats, ST_QUIC, 1, 0);
			} else {
				sid = 0;
				stat_add(&lb_stats, ST_QUIC, 0, 1);
			}
		}
	}
	if (!sid && pick_real(&pd, vip, hash, &real_idx))
		return XDP_DROP;
	real = bpf_map_lookup_elem(&reals, &real_idx);
	if (!real)
		return XDP_DROP;
	stat_add(&real_stats, real_idx, 1, pd.l3_len);

	if (real->flags & F_REAL_IPV6)
		ret = encap_v6(ctx, &pd, real, hash, vip->flags & F_GUE_ENCAP);
	else if (pd.is_ipv6)
		return XDP_DROP; /* IPv6 cannot ride in IPv4: misconfigured real */
	else
		ret = encap_v4(ctx, &pd, real, hash, vip->flags & F_GUE_ENCAP);
	if (ret) {
		stat_add(&lb_stats, ST_ERRORS, 0, 1);
		return XDP_DROP;
	}
	return XDP_TX;

pass:
	stat_add(&lb_stats, ST_PASS, 1, frame_len);
	return XDP_PASS;
malformed:
	stat_add(&lb_stats, ST_ERRORS, 1, 0);
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
