/* SPDX-License-Identifier: Apache-2.0 */
/*
 * EDF-style load balancer: packets (a datagram service: no flow affinity)
 * are sprayed over NB backends by earliest deadline first. Backend b has a
 * virtual deadline and a service time per packet (its inverse weight,
 * 12..24 from b); a packet goes to the backend with the smallest deadline
 * (the first such, on ties), whose deadline then grows by its service time
 * — weighted fair sharing without per-flow state. Packets of a flow listed
 * in `pinned` (a control plane's override) go to their backend instead.
 * The chosen backend's address is written into the packet (destination
 * IPv4 10.1.0.b, checksum updated) and it goes out again (XDP_TX); a
 * control plane reads the deadlines and per-backend counts.
 *
 * Built twice: plain eBPF (a loop over the NB deadlines) and with
 * -DUSE_KFUNCS (bpfjet_argmin_u32: a vector minimum over the deadlines).
 */
#include "nf.h"
#ifdef USE_KFUNCS
#include "../../include/bpfjet_kfuncs.h"
#endif

#ifndef NB
#define NB 32
#endif

struct sched {
	__u32 deadline[NB];
	__u64 count[NB];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sched);
} sched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct flow_key);
	__type(value, __u32);
} pinned SEC(".maps");

static __always_inline __u32 earliest(const struct sched *s)
{
#ifdef USE_KFUNCS
	return bpfjet_argmin_u32(s->deadline, sizeof(s->deadline));
#else
	/* Branch-free: a compare-and-branch per backend would make the
	 * kernel's verifier walk every combination of outcomes. */
	__u64 m = 0, best = s->deadline[0];
	for (__u32 i = 1; i < NB; i++) {
		__u64 d = s->deadline[i];
		__u64 mask = -((d - best) >> 63); /* all ones when d < best */
		asm volatile("" : "+r"(mask));
		best ^= (best ^ d) & mask;
		m ^= (m ^ i) & mask;
	}
	return m;
#endif
}

SEC("xdp")
int edflb(struct xdp_md *ctx)
{
	struct flow_key key;
	__u32 zero = 0;
	if (parse_flow(ctx, &key) < 0)
		return XDP_PASS;
	struct sched *s = bpf_map_lookup_elem(&sched, &zero);
	if (!s)
		return XDP_ABORTED;
	__u32 *pin = bpf_map_lookup_elem(&pinned, &key);
	__u32 b = pin ? *pin : earliest(s);
	asm volatile("" : "+r"(b));
	if (b >= NB)
		return XDP_DROP;
	s->deadline[b] += 12 + (b % 4) * 4;
	s->count[b]++;

	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	if ((void *)(ip + 1) > end)
		return XDP_ABORTED;
	/* New destination 10.1.0.b; the header checksum follows (RFC 1624). */
	__u32 old = ip->daddr, new = bpf_htonl(0x0a010000 | b);
	__u32 sum = (__u16)~ip->check;
	sum += (__u16)~old + (__u16)~(old >> 16) + (__u16)new + (__u16)(new >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = ~sum;
	ip->daddr = new;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
