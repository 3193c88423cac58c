/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cuckoo filter (Fan et al., CoNEXT'14) of flows seen: NBUCKETS buckets of
 * SLOTS 16-bit fingerprints (0 = empty). A flow's fingerprint f lives in
 * bucket i1 = h % NBUCKETS or i2 = i1 ^ alt(f) (partial-key cuckoo
 * hashing: either bucket and f give the other). A packet of a flow found
 * in either bucket passes (a member); an unknown flow is inserted — into a
 * free slot of either bucket, else by evicting a fingerprint from bucket
 * i2 to its alternate bucket, up to MAX_KICKS times (the victim slot
 * rotates with the kick number) — and goes out again (XDP_TX: "first
 * packet of a new flow"); a flow that cannot be placed is dropped (the
 * last evicted fingerprint is held in `stats`, as the paper's victim
 * cache). A control plane reads the buckets (membership) and statistics.
 *
 * Built twice: plain eBPF (table CRC32C, slot loops) and with -DUSE_KFUNCS
 * (bpfjet_crc32c; bpfjet_find_u16 over a bucket: one vector compare when
 * inlined).
 */
#include "nf.h"
#ifdef USE_KFUNCS
#include "../../include/bpfjet_kfuncs.h"
#endif

#ifndef NBUCKETS
#define NBUCKETS 1024
#endif
#ifndef SLOTS
#define SLOTS 16
#endif
#define MAX_KICKS 16

struct bucket {
	__u16 fp[SLOTS];
};

struct stats {
	__u64 members;
	__u64 inserted;
	__u64 kicks;
	__u64 failed;
	__u32 victim;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NBUCKETS);
	__type(key, __u32);
	__type(value, struct bucket);
} buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stats);
} stats SEC(".maps");

static __always_inline __u32 find_fp(const struct bucket *b, __u16 fp)
{
#ifdef USE_KFUNCS
	return bpfjet_find_u16(b->fp, sizeof(b->fp), fp);
#else
	__u32 i;
	for (i = 0; i < SLOTS; i++)
		if (b->fp[i] == fp)
			break;
	return i;
#endif
}

static __always_inline __u32 flow_hash(const struct flow_key *k)
{
#ifdef USE_KFUNCS
	return bpfjet_crc32c(k, FLOW_KEY_BYTES, 0x85ebca6b);
#else
	return crc32c_plain((const __u8 *)k, 0x85ebca6b);
#endif
}

/* The other bucket of fingerprint fp in bucket i (an involution). */
static __always_inline __u32 alt_bucket(__u32 i, __u16 fp)
{
	return (i ^ ((__u32)fp * 0x5bd1e995u >> 16)) % NBUCKETS;
}

SEC("xdp")
int cuckoofilter(struct xdp_md *ctx)
{
	struct flow_key key;
	__u32 zero = 0;
	if (parse_flow(ctx, &key) < 0)
		return XDP_PASS;
	struct stats *st = bpf_map_lookup_elem(&stats, &zero);
	if (!st)
		return XDP_ABORTED;
	__u32 h = flow_hash(&key);
	__u16 fp = (h >> 16) ? (h >> 16) : 1;
	__u32 idx[2] = {h % NBUCKETS, 0};
	idx[1] = alt_bucket(idx[0], fp);
	struct bucket *b[2];
	for (int j = 0; j < 2; j++) {
		b[j] = bpf_map_lookup_elem(&buckets, &idx[j]);
		if (!b[j])
			return XDP_ABORTED;
	}
	for (int j = 0; j < 2; j++) {
		if (find_fp(b[j], fp) < SLOTS) {
			st->members++;
			return XDP_PASS;
		}
	}
	for (int j = 0; j < 2; j++) {
		__u32 i = find_fp(b[j], 0);
		if (i < SLOTS) {
			b[j]->fp[i] = fp;
			st->inserted++;
			return XDP_TX;
		}
	}
	/* Both full: evict along bucket i2's chain. */
	__u32 at = idx[1];
	struct bucket *cur = b[1];
	for (__u32 kick = 0; kick < MAX_KICKS; kick++) {
		__u32 slot = kick % SLOTS;
		__u16 victim = cur->fp[slot];
		cur->fp[slot] = fp;
		fp = victim;
		st->kicks++;
		at = alt_bucket(at, fp);
		cur = bpf_map_lookup_elem(&buckets, &at);
		if (!cur)
			return XDP_ABORTED;
		__u32 i = find_fp(cur, 0);
		if (i < SLOTS) {
			cur->fp[i] = fp;
			st->inserted++;
			return XDP_TX;
		}
	}
	st->failed++;
	st->victim = fp;
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
