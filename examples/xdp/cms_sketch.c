// SPDX-License-Identifier: GPL-2.0
/*
 * cms_sketch: count-min sketch of packets per 5-tuple (the eNetSTL "multi-hash
 * then count" NF). D = 4 rows of W = 4096 32-bit counters, one independent hash
 * per row; the estimate is the minimum of the D counters. Flows whose estimate
 * crosses a threshold are recorded in `heavy_hitters`. Always XDP_PASS.
 *
 * Counters are shared by all CPUs and bumped with atomic fetch-add, so the
 * sketch never under-counts under concurrency.
 */
#include "common.h"

#define CMS_ROWS 4
#define CMS_COLS 4096 /* power of two: the column is hash & (W - 1) */

/* .rodata: packets before a flow counts as a heavy hitter. */
const volatile __u32 hh_threshold = 1024;

struct flow5 {
	__be32 saddr[4];
	__be32 daddr[4];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct cms_row {
	__u32 cnt[CMS_COLS];
};

struct hh_info {
	__u64 estimate; /* latest sketch estimate */
	__u64 bytes; /* bytes seen since the flow became heavy */
};

/* One array element per row: 16 KiB values, CMS_ROWS lookups per packet. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CMS_ROWS);
	__type(key, __u32);
	__type(value, struct cms_row);
} cms SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct flow5);
	__type(value, struct hh_info);
} heavy_hitters SEC(".maps");

/* Row hashes. Rows 0-2 are the lookup3-style hash with distinct seeds; row 3 is
 * FNV-1a so one row does not share the others' weaknesses. */
static const __u32 row_seed[3] = { 0x9e3779b9, 0x85ebca6b, 0xc2b2ae35 };

static __always_inline __u32 fold_addr(const __be32 *a, __u32 seed)
{
	return flow_hash_4w(a, seed);
}

static __always_inline __u32 fnv1a_flow(const struct flow5 *f)
{
	const __u8 *p = (const __u8 *)f;
	__u32 h = 2166136261U;

	/* Every byte except the padding: 37 bytes, fully unrolled. */
#pragma unroll
	for (int i = 0; i < (int)offsetof(struct flow5, pad); i++) {
		h ^= p[i];
		h *= 16777619U;
	}
	return h;
}

static __always_inline __u32 row_hash(const struct flow5 *f, __u32 row)
{
	__u32 ports = ((__u32)f->sport << 16) | f->dport;

	if (row == 3)
		return fnv1a_flow(f);
	return flow_hash_3w(fold_addr(f->saddr, row_seed[row]),
			    fold_addr(f->daddr, row_seed[row]) ^ f->proto, ports, row_seed[row]);
}

static __always_inline int parse_flow(struct xdp_md *ctx, struct flow5 *f)
{
	struct cursor c;
	__be16 proto;

	cursor_init(&c, ctx);
	proto = parse_eth(&c, NULL);
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = parse_ipv4(&c);

		if (!iph)
			return -1;
		f->saddr[0] = iph->saddr;
		f->daddr[0] = iph->daddr;
		f->proto = iph->protocol;
		if (iph->frag_off & bpf_htons(IP_OFFSET_))
			return 0; /* later fragments count toward the addresses-only flow */
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = parse_ipv6(&c);

		if (!ip6h)
			return -1;
		__builtin_memcpy(f->saddr, &ip6h->saddr, 16);
		__builtin_memcpy(f->daddr, &ip6h->daddr, 16);
		f->proto = ip6h->nexthdr;
	} else {
		return -1;
	}

	if (f->proto == IPPROTO_TCP) {
		struct tcphdr *th = parse_tcp(&c);

		if (th) {
			f->sport = th->source;
			f->dport = th->dest;
		}
	} else if (f->proto == IPPROTO_UDP) {
		struct udphdr *uh = parse_udp(&c);

		if (uh) {
			f->sport = uh->source;
			f->dport = uh->dest;
		}
	}
	return 0;
}

SEC("xdp")
int cms_sketch(struct xdp_md *ctx)
{
	struct flow5 f = {};
	struct hh_info *hh;
	__u32 estimate = ~0U;

	if (parse_flow(ctx, &f))
		return XDP_PASS;

#pragma unroll
	for (__u32 row = 0; row < CMS_ROWS; row++) {
		__u32 key = row;
		struct cms_row *r = bpf_map_lookup_elem(&cms, &key);
		__u32 col, now;

		if (!r)
			return XDP_PASS;
		col = row_hash(&f, row) & (CMS_COLS - 1);
		now = __sync_fetch_and_add(&r->cnt[col], 1) + 1;
		if (now < estimate)
			estimate = now;
	}

	if (estimate < hh_threshold)
		return XDP_PASS;

	hh = bpf_map_lookup_elem(&heavy_hitters, &f);
	if (hh) {
		hh->estimate = estimate;
		__sync_fetch_and_add(&hh->bytes, ctx->data_end - ctx->data);
	} else {
		struct hh_info fresh = {
			.estimate = estimate,
			.bytes = ctx->data_end - ctx->data,
		};

		/* NOEXIST: another CPU may have inserted it meanwhile; then it stays. */
		bpf_map_update_elem(&heavy_hitters, &f, &fresh, BPF_NOEXIST);
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
