// SPDX-License-Identifier: GPL-2.0
/*
 * ringbuf_sampler: packet sampling to a BPF ring buffer.
 *
 *  - every `sample_every`-th packet (per CPU) reserves a SAMPLE event in place
 *    (bpf_ringbuf_reserve/submit) and copies up to 128 header bytes into it;
 *  - every TCP SYN is reported as a small SYN event built on the stack and
 *    copied with bpf_ringbuf_output (the other API, one extra copy).
 * When the ring is full the event is lost and counted. Always XDP_PASS.
 */
#include "common.h"

#define SNAP_LEN 128
#define RING_BYTES (256 * 1024) /* power of two, multiple of the page size */

enum event_kind { EV_SAMPLE = 1, EV_SYN = 2 };

/* .rodata: sampling period in packets. */
const volatile __u32 sample_every = 64;

struct sample_event {
	__u32 kind;
	__u32 ifindex;
	__u32 pkt_len;
	__u32 cap_len; /* bytes of hdr[] that are valid */
	__u64 seq; /* this CPU's packet number */
	__u8 hdr[SNAP_LEN];
};

struct syn_event {
	__u32 kind;
	__u32 family;
	__be32 saddr[4];
	__be32 daddr[4];
	__be16 sport;
	__be16 dport;
	__u32 pad;
};

struct sampler_stats {
	__u64 packets;
	__u64 samples;
	__u64 syns;
	__u64 lost; /* events dropped because the ring was full */
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sampler_stats);
} sampler_stats SEC(".maps");

static __always_inline void sample(struct xdp_md *ctx, struct sampler_stats *st, __u64 seq)
{
	struct sample_event *ev;
	__u32 len = ctx->data_end - ctx->data;
	__u32 cap = len < SNAP_LEN ? len : SNAP_LEN;

	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		st->lost++;
		return;
	}
	ev->kind = EV_SAMPLE;
	ev->ifindex = ctx->ingress_ifindex;
	ev->pkt_len = len;
	ev->seq = seq;
	/* bpf_xdp_load_bytes wants a length the verifier can bound to [1, SNAP_LEN].
	 * Without the barrier clang merges both tests into one `cap - 1 < SNAP_LEN`
	 * on a copy of cap, and the register passed to the helper stays unbounded
	 * below. */
	barrier_var(cap);
	if (cap < 1 || cap > SNAP_LEN || bpf_xdp_load_bytes(ctx, 0, ev->hdr, cap))
		cap = 0;
	ev->cap_len = cap;
	/* Whole event is submitted (hdr tail may be stale: cap_len says what is valid). */
	bpf_ringbuf_submit(ev, 0);
	st->samples++;
}

static __always_inline void report_syn(struct sampler_stats *st, struct syn_event *ev)
{
	ev->kind = EV_SYN;
	if (bpf_ringbuf_output(&events, ev, sizeof(*ev), 0))
		st->lost++;
	else
		st->syns++;
}

SEC("xdp")
int ringbuf_sampler(struct xdp_md *ctx)
{
	struct syn_event syn = {};
	struct sampler_stats *st;
	struct tcphdr *th;
	struct cursor c;
	__u32 zero = 0;
	__be16 proto;
	__u8 l4;
	__u64 seq;

	st = bpf_map_lookup_elem(&sampler_stats, &zero);
	if (!st)
		return XDP_PASS;
	seq = st->packets++;
	if (sample_every && seq % sample_every == 0)
		sample(ctx, st, seq);

	cursor_init(&c, ctx);
	proto = parse_eth(&c, NULL);
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = parse_ipv4(&c);

		if (!iph || (iph->frag_off & bpf_htons(IP_OFFSET_)))
			return XDP_PASS;
		syn.family = 4;
		syn.saddr[0] = iph->saddr;
		syn.daddr[0] = iph->daddr;
		l4 = iph->protocol;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = parse_ipv6(&c);

		if (!ip6h)
			return XDP_PASS;
		syn.family = 6;
		__builtin_memcpy(syn.saddr, &ip6h->saddr, 16);
		__builtin_memcpy(syn.daddr, &ip6h->daddr, 16);
		l4 = ip6h->nexthdr;
	} else {
		return XDP_PASS;
	}
	if (l4 != IPPROTO_TCP)
		return XDP_PASS;
	th = parse_tcp(&c);
	if (th && th->syn && !th->ack) {
		syn.sport = th->source;
		syn.dport = th->dest;
		report_syn(st, &syn);
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
