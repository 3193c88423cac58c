// SPDX-License-Identifier: GPL-2.0
/*
 * rate_limiter: a token bucket per source address (IPv4 or IPv6).
 *
 * Buckets live in an LRU hash so a flood of spoofed sources evicts old buckets
 * instead of failing inserts. Tokens are kept in nano-tokens (1 token = 1e9),
 * so refilling is `elapsed_ns * rate` with no division on the fast path.
 *
 * Configuration: the rate is in .rodata (fixed at load time), the burst in
 * .data (a control plane may change it at run time). Counters are in .bss.
 */
#include "common.h"

#define NANO_TOKENS_PER_TOKEN 1000000000ULL
/* Cap on the refill interval: keeps elapsed * rate far from u64 overflow. */
#define MAX_REFILL_NS (10ULL * 1000000000ULL)

const volatile __u64 rate_pps = 1000; /* tokens per second per source */
__u64 burst = 32; /* bucket depth, in packets */

__u64 passed_pkts;
__u64 dropped_pkts;
__u64 new_sources;

struct src_key {
	__u8 addr[16]; /* IPv4 as ::ffff:a.b.c.d */
};

struct bucket {
	__u64 tokens; /* nano-tokens */
	__u64 last_ns; /* time of the last refill */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct src_key);
	__type(value, struct bucket);
} buckets SEC(".maps");

static __always_inline int parse_source(struct xdp_md *ctx, struct src_key *k)
{
	struct cursor c;
	__be16 proto;

	cursor_init(&c, ctx);
	proto = parse_eth(&c, NULL);
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = parse_ipv4(&c);

		if (!iph)
			return -1;
		k->addr[10] = 0xff;
		k->addr[11] = 0xff;
		__builtin_memcpy(&k->addr[12], &iph->saddr, 4);
		return 0;
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = parse_ipv6(&c);

		if (!ip6h)
			return -1;
		__builtin_memcpy(k->addr, &ip6h->saddr, 16);
		return 0;
	}
	return 1; /* not IP: not limited */
}

SEC("xdp")
int rate_limiter(struct xdp_md *ctx)
{
	struct src_key k = {};
	struct bucket *b;
	__u64 now, cap, elapsed;
	int ret = parse_source(ctx, &k);

	if (ret > 0)
		return XDP_PASS;
	if (ret < 0) {
		__sync_fetch_and_add(&dropped_pkts, 1);
		return XDP_DROP;
	}

	now = bpf_ktime_get_ns();
	cap = burst * NANO_TOKENS_PER_TOKEN;
	b = bpf_map_lookup_elem(&buckets, &k);
	if (!b) {
		/* A new source starts with a full bucket and spends one token now. */
		struct bucket fresh = {
			.tokens = cap > NANO_TOKENS_PER_TOKEN ? cap - NANO_TOKENS_PER_TOKEN : 0,
			.last_ns = now,
		};

		bpf_map_update_elem(&buckets, &k, &fresh, BPF_ANY);
		__sync_fetch_and_add(&new_sources, 1);
		__sync_fetch_and_add(&passed_pkts, 1);
		return XDP_PASS;
	}

	/* Only refill when time moved forward: a bucket stamped in the future (clock
	 * source change, or a control plane pinning it) just gets no refill. */
	if (now > b->last_ns) {
		elapsed = now - b->last_ns;
		if (elapsed > MAX_REFILL_NS)
			elapsed = MAX_REFILL_NS;
		b->tokens += elapsed * rate_pps;
		if (b->tokens > cap)
			b->tokens = cap;
		b->last_ns = now;
	}

	if (b->tokens < NANO_TOKENS_PER_TOKEN) {
		__sync_fetch_and_add(&dropped_pkts, 1);
		return XDP_DROP;
	}
	b->tokens -= NANO_TOKENS_PER_TOKEN;
	__sync_fetch_and_add(&passed_pkts, 1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
