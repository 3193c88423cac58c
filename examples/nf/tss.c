/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tuple-space-search packet classifier (Srinivasan et al., SIGCOMM'99; the
 * shape of Open vSwitch's megaflow classifier): rules over the 5-tuple with
 * wildcards, grouped by their mask (a "tuple": which bits of each field the
 * rule looks at). Each tuple has a hash table of the rules' masked keys. A
 * packet is classified by probing every tuple in use: mask the packet's
 * key with the tuple's mask, hash it, look the masked key up in that
 * tuple's table; of the rules found, the one with the highest priority
 * wins (the earlier tuple on a tie). Its action is the verdict — drop,
 * pass, or redirect to an interface — and its hit counter counts the
 * packet; a packet no rule matches passes and is counted as a miss.
 *
 * The control plane installs everything through maps: the masks in
 * `tuples` (with how many are in use), each rule's masked key, priority
 * and id in a slot of bucket crc32c(masked key) % NBUCKETS of its tuple's
 * table (`tables`, entry tuple * NBUCKETS + bucket), with the slot's
 * 16-bit signature (the hash's high half, low bit set: 0 is a free slot),
 * and the rule's action in `rules`. It reads `hits` and `stats`.
 *
 * Built twice: plain eBPF (CRC32C a byte at a time from a table, the
 * bucket's slots compared one by one) and with -DUSE_KFUNCS
 * (bpfjet_crc32c over the 16-byte masked key: two crc32 instructions when
 * inlined; bpfjet_mask_u16 over the bucket's signatures: one vector
 * compare; bpfjet_key16_eq for the full key of a slot whose signature
 * matched: one 128-bit compare).
 */
#include "nf.h"
#ifdef USE_KFUNCS
#include "../../include/bpfjet_kfuncs.h"
#endif

#ifndef NTUPLES
#define NTUPLES 16
#endif
#define NBUCKETS 64
#define SLOTS 8
#define MAX_RULES 4096
#define TSS_SEED 0x9e3779b9

/* The masked 5-tuple: 16 bytes, padding zero (masks have it zero too). */
struct tss_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct tuple_set {
	struct tss_key mask[NTUPLES];
	__u32 ntuples; /* tuples in use: mask[0..ntuples) */
};

struct slot {
	struct tss_key key;
	__u32 rule;
	__u32 prio;
};

struct bucket {
	__u16 sig[SLOTS];
	struct slot s[SLOTS];
};

struct rule {
	__u32 action; /* XDP_DROP, XDP_PASS or XDP_REDIRECT */
	__u32 ifindex; /* for XDP_REDIRECT */
};

struct stats {
	__u64 packets;
	__u64 misses;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tuple_set);
} tuples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NTUPLES * NBUCKETS);
	__type(key, __u32);
	__type(value, struct bucket);
} tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_RULES);
	__type(key, __u32);
	__type(value, struct rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_RULES);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stats);
} stats SEC(".maps");

static __always_inline __u32 key_hash(const struct tss_key *k)
{
#ifdef USE_KFUNCS
	return bpfjet_crc32c(k, sizeof(*k), TSS_SEED);
#else
	const __u8 *p = (const __u8 *)k;
	__u32 c = TSS_SEED;
#pragma unroll
	for (int i = 0; i < (int)sizeof(*k); i++)
		c = crc32c_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
	return c;
#endif
}

/* The slot of bucket b holding masked key k (signature sig), SLOTS if none. */
static __always_inline __u32 find_rule(const struct bucket *b, const struct tss_key *k, __u16 sig)
{
#ifdef USE_KFUNCS
	__u64 m = bpfjet_mask_u16(b->sig, sizeof(b->sig), sig);
	for (int j = 0; j < SLOTS && m; j++) {
		__u32 i = bpfjet_ctz64(m) & (SLOTS - 1);
		if (bpfjet_key16_eq((const struct bpfjet_key16 *)&b->s[i].key,
				    (const struct bpfjet_key16 *)k))
			return i;
		m &= m - 1;
	}
	return SLOTS;
#else
	const __u64 *kw = (const __u64 *)k;
	for (__u32 i = 0; i < SLOTS; i++) {
		const __u64 *sw = (const __u64 *)&b->s[i].key;
		if (b->sig[i] == sig && sw[0] == kw[0] && sw[1] == kw[1])
			return i;
	}
	return SLOTS;
#endif
}

SEC("xdp")
int tss(struct xdp_md *ctx)
{
	struct flow_key fk;
	__u32 zero = 0;
	struct stats *st = bpf_map_lookup_elem(&stats, &zero);
	const struct tuple_set *ts = bpf_map_lookup_elem(&tuples, &zero);
	if (!st || !ts)
		return XDP_ABORTED;
	if (parse_flow(ctx, &fk) < 0)
		return XDP_PASS;
	st->packets++;
	struct tss_key key = {
		.saddr = fk.saddr,
		.daddr = fk.daddr,
		.sport = fk.sport,
		.dport = fk.dport,
		.proto = fk.proto,
	};
	const __u64 *kw = (const __u64 *)&key;
	__u32 n = ts->ntuples;
	__u32 best_rule = 0, best_prio = 0;
	int found = 0;

	for (__u32 t = 0; t < NTUPLES; t++) {
		if (t >= n)
			break;
		const __u64 *mw = (const __u64 *)&ts->mask[t];
		struct tss_key mk;
		__u64 *mkw = (__u64 *)&mk;
		mkw[0] = kw[0] & mw[0];
		mkw[1] = kw[1] & mw[1];
		__u32 h = key_hash(&mk);
		__u16 sig = (h >> 16) | 1;
		__u32 idx = t * NBUCKETS + h % NBUCKETS;
		const struct bucket *b = bpf_map_lookup_elem(&tables, &idx);
		if (!b)
			return XDP_ABORTED;
		__u32 i = find_rule(b, &mk, sig);
		if (i >= SLOTS)
			continue;
		__u32 prio = b->s[i].prio;
		if (!found || prio > best_prio) {
			best_prio = prio;
			best_rule = b->s[i].rule;
			found = 1;
		}
	}
	if (!found) {
		st->misses++;
		return XDP_PASS;
	}
	const struct rule *r = bpf_map_lookup_elem(&rules, &best_rule);
	__u64 *hit = bpf_map_lookup_elem(&hits, &best_rule);
	if (!r || !hit)
		return XDP_ABORTED;
	*hit += 1;
	switch (r->action) {
	case XDP_DROP:
		return XDP_DROP;
	case XDP_REDIRECT:
		return bpf_redirect(r->ifindex, 0);
	default:
		return XDP_PASS;
	}
}

char _license[] SEC("license") = "GPL";
