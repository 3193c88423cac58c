// SPDX-License-Identifier: GPL-2.0
/*
 * scale_hdr_loops: a packet classifier built from bounded loops over
 * headers, the shape that makes verification expensive (every iteration is
 * explored, and every branch inside multiplies the states), written for
 * bpfjet's verifier scale test (crates/verifier/tests/scale.rs).
 *
 *   Ethernet -> up to 4 stacked VLAN tags (loop)
 *     -> IPv4: options walked (loop, up to 10 options: NOP, EOL, RR,
 *        timestamp, others skipped by length)
 *     -> IPv6: extension header chain (loop, up to 6 headers: hop-by-hop,
 *        routing, destination options, fragment)
 *     -> TCP: options walked (loop, up to TCP_OPT_MAX: MSS and window
 *        scale noted, others skipped)
 *     -> UDP: port rules
 *   -> per-rule verdicts from maps (port and address deny lists), per-class
 *      counters in a PERCPU_ARRAY.
 *
 * The loops are kept as loops (`unroll(disable)`), as xdp-filter's are.
 */
#include "common.h"

#define VLAN_MAX 2
#define IP4_OPT_MAX 8
#define IP6_EXT_MAX 6
#define TCP_OPT_MAX 8

#define C_PASS 0
#define C_DROP_PORT 1
#define C_DROP_ADDR 2
#define C_BAD 3
#define C_VLAN 4
#define C_IP4_OPT 5
#define C_IP6_EXT 6
#define C_TCP_MSS 7
#define C_TCP_WS 8
#define C_FRAG 9
#define C_MAX 10

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} classes SEC(".maps");

/* Ports (host order) whose traffic is dropped, per protocol: key = proto << 16 | port. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} deny_ports SEC(".maps");

/* IPv4 sources that are dropped. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} deny_v4 SEC(".maps");

/* TCP MSS clamp per VLAN id (0 = untagged). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u16);
} mss_clamp SEC(".maps");

static __always_inline void count(__u32 class)
{
	__u64 *v = bpf_map_lookup_elem(&classes, &class);

	if (v)
		*v += 1;
}

struct meta {
	__u16 vlan;
	__u16 mss;
	__u8 wscale;
	__u8 ip4_opts;
	__u8 ip6_exts;
	__u8 frag;
};

/* The loops below keep their position as an offset from the header start,
 * bounded on every iteration, rather than as a pointer advanced by each
 * option's length: the verifier then sees a few offset ranges per iteration
 * instead of one pointer per combination of option lengths. */
#define OFF_MAX 1500

/* Walk the TCP options in [off, stop): MSS and window scale. */
static __always_inline int tcp_options(void *base, void *end, __u64 off, __u64 stop,
				       struct meta *m)
{
	int i;

#pragma clang loop unroll(disable)
	for (i = 0; i < TCP_OPT_MAX; i++) {
		__u8 *opt;
		__u8 kind, len;

		if (off >= stop || off > OFF_MAX)
			break;
		opt = base + off;
		if ((void *)(opt + 1) > end)
			break;
		kind = opt[0];
		if (kind == 0) /* end of options */
			break;
		if (kind == 1) { /* NOP */
			off++;
			continue;
		}
		if ((void *)(opt + 4) > end)
			return -1;
		len = opt[1];
		if (len < 2)
			return -1;
		if (kind == 2 && len == 4) /* MSS */
			m->mss = (opt[2] << 8) | opt[3];
		else if (kind == 3 && len == 3) /* window scale */
			m->wscale = opt[2] > 14 ? 14 : opt[2];
		off += len;
	}
	return 0;
}

/* Walk the IPv4 options in [off, stop); returns -1 on a malformed option. */
static __always_inline int ip4_options(void *base, void *end, __u64 off, __u64 stop,
				       struct meta *m)
{
	int i;

#pragma clang loop unroll(disable)
	for (i = 0; i < IP4_OPT_MAX; i++) {
		__u8 *opt;
		__u8 kind, len;

		if (off >= stop || off > OFF_MAX)
			break;
		opt = base + off;
		if ((void *)(opt + 2) > end)
			break;
		kind = opt[0];
		if (kind == 0)
			break;
		if (kind == 1) {
			off++;
			continue;
		}
		len = opt[1];
		if (len < 2)
			return -1;
		if (kind == 7 || kind == 68) /* record route, timestamp */
			m->ip4_opts = 1;
		off += len;
	}
	return 0;
}

/* Follow the IPv6 extension header chain from `*off`; returns the
 * upper-layer protocol and leaves *off after the last extension header,
 * or -1. */
static __always_inline int ip6_exts(void *base, void *end, __u8 next, __u64 *off,
				    struct meta *m)
{
	__u64 o = *off;
	int i;

#pragma clang loop unroll(disable)
	for (i = 0; i < IP6_EXT_MAX; i++) {
		__u8 *h;

		if (next != 0 && next != 43 && next != 60 && next != 44)
			break;
		if (o > OFF_MAX)
			return -1;
		h = base + o;
		if ((void *)(h + 8) > end)
			return -1;
		m->ip6_exts = 1;
		if (next == 44) { /* fragment */
			m->frag = 1;
			o += 8;
		} else { /* hop-by-hop, routing, destination options */
			o += (h[1] + 1) * 8;
		}
		next = h[0];
	}
	*off = o;
	return next;
}

static __always_inline int port_denied(__u8 proto, __u16 port)
{
	__u32 key = (__u32)proto << 16 | port;

	return bpf_map_lookup_elem(&deny_ports, &key) != 0;
}

SEC("xdp")
int scale_hdr_loops(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct meta m = {};
	void *pos;
	__u16 proto;
	__u64 off;
	int l4 = -1, i;

	if ((void *)(eth + 1) > end) {
		count(C_BAD);
		return XDP_DROP;
	}
	proto = eth->h_proto;
	pos = eth + 1;

#pragma clang loop unroll(disable)
	for (i = 0; i < VLAN_MAX; i++) {
		struct vlan_hdr_ *vh = pos;

		if (proto != bpf_htons(ETH_P_8021Q_) && proto != bpf_htons(ETH_P_8021AD_))
			break;
		if ((void *)(vh + 1) > end) {
			count(C_BAD);
			return XDP_DROP;
		}
		if (!m.vlan)
			m.vlan = bpf_ntohs(vh->tci) & 0x0fff;
		proto = vh->encap_proto;
		pos = vh + 1;
		count(C_VLAN);
	}

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = pos;
		__u32 saddr;

		if ((void *)(iph + 1) > end || iph->ihl < 5) {
			count(C_BAD);
			return XDP_DROP;
		}
		saddr = iph->saddr;
		if (bpf_map_lookup_elem(&deny_v4, &saddr)) {
			count(C_DROP_ADDR);
			return XDP_DROP;
		}
		if (ip4_options(iph, end, sizeof(*iph), iph->ihl * 4, &m) < 0) {
			count(C_BAD);
			return XDP_DROP;
		}
		if (m.ip4_opts)
			count(C_IP4_OPT);
		if (iph->frag_off & bpf_htons(IP_MF_ | IP_OFFSET_)) {
			count(C_FRAG);
			return XDP_PASS;
		}
		l4 = iph->protocol;
		pos = (__u8 *)iph + iph->ihl * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = pos;

		if ((void *)(ip6 + 1) > end) {
			count(C_BAD);
			return XDP_DROP;
		}
		off = 0;
		l4 = ip6_exts(ip6 + 1, end, ip6->nexthdr, &off, &m);
		if (l4 < 0 || off > OFF_MAX) {
			count(C_BAD);
			return XDP_DROP;
		}
		pos = (void *)(ip6 + 1) + off;
		if (m.ip6_exts)
			count(C_IP6_EXT);
		if (m.frag) {
			count(C_FRAG);
			return XDP_PASS;
		}
	} else {
		count(C_PASS);
		return XDP_PASS;
	}

	if (l4 == IPPROTO_TCP) {
		struct tcphdr *th = pos;

		if ((void *)(th + 1) > end || th->doff < 5) {
			count(C_BAD);
			return XDP_DROP;
		}
		if (port_denied(IPPROTO_TCP, bpf_ntohs(th->dest))) {
			count(C_DROP_PORT);
			return XDP_DROP;
		}
		if (tcp_options(th, end, sizeof(*th), th->doff * 4, &m) < 0) {
			count(C_BAD);
			return XDP_DROP;
		}
		if (m.mss) {
			__u32 vlan = m.vlan;
			__u16 *clamp = bpf_map_lookup_elem(&mss_clamp, &vlan);

			count(C_TCP_MSS);
			if (clamp && *clamp && m.mss > *clamp)
				return XDP_DROP;
		}
		if (m.wscale)
			count(C_TCP_WS);
	} else if (l4 == IPPROTO_UDP) {
		struct udphdr *uh = pos;

		if ((void *)(uh + 1) > end) {
			count(C_BAD);
			return XDP_DROP;
		}
		if (port_denied(IPPROTO_UDP, bpf_ntohs(uh->dest))) {
			count(C_DROP_PORT);
			return XDP_DROP;
		}
	}
	count(C_PASS);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
