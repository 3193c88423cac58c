/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A two-choice bucketized flow table (the shape of a blocked cuckoo hash):
 * NBUCKETS buckets of 16 slots, each slot a 16-bit flow signature and a
 * packet count. A packet's flow is looked up in its two candidate buckets;
 * a hit counts the packet, a miss takes the first free slot (signature 0)
 * of either bucket, and a flow that finds both buckets full is dropped.
 *
 * Built twice: plain eBPF (bitwise CRC32C, slot-by-slot search) and with
 * -DUSE_KFUNCS (bpfjet_crc32c, bpfjet_find_u16 over a bucket's 16
 * signatures: one vector compare when the JIT inlines it).
 */
#include "nf.h"
#ifdef USE_KFUNCS
#include "../../include/bpfjet_kfuncs.h"
#endif

#define NBUCKETS 64
#define SLOTS 16

struct bucket {
	__u16 sig[SLOTS];
	__u32 count[SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NBUCKETS);
	__type(key, __u32);
	__type(value, struct bucket);
} buckets SEC(".maps");

static __always_inline __u32 find_slot(const struct bucket *b, __u16 sig)
{
#ifdef USE_KFUNCS
	return bpfjet_find_u16(b->sig, sizeof(b->sig), sig);
#else
	__u32 i;
	for (i = 0; i < SLOTS; i++)
		if (b->sig[i] == sig)
			break;
	return i;
#endif
}

static __always_inline __u32 flow_hash(const struct flow_key *k)
{
#ifdef USE_KFUNCS
	return bpfjet_crc32c(k, FLOW_KEY_BYTES, 0x9e3779b9);
#else
	return crc32c_plain((const __u8 *)k, 0x9e3779b9);
#endif
}

SEC("xdp")
int cuckoo(struct xdp_md *ctx)
{
	struct flow_key key;
	if (parse_flow(ctx, &key) < 0)
		return XDP_PASS;
	__u32 h = flow_hash(&key);
	__u16 sig = (h >> 16) | 1;
	__u32 idx[2] = {h % NBUCKETS, (h ^ (sig * 0x5bd1e995u)) % NBUCKETS};
	struct bucket *b[2];
	for (int j = 0; j < 2; j++) {
		b[j] = bpf_map_lookup_elem(&buckets, &idx[j]);
		if (!b[j])
			return XDP_ABORTED;
	}
	for (int j = 0; j < 2; j++) {
		__u32 i = find_slot(b[j], sig);
		if (i < SLOTS) {
			b[j]->count[i] += 1;
			return XDP_PASS;
		}
	}
	for (int j = 0; j < 2; j++) {
		__u32 i = find_slot(b[j], 0);
		if (i < SLOTS) {
			b[j]->sig[i] = sig;
			b[j]->count[i] = 1;
			return XDP_PASS;
		}
	}
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
