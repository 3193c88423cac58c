/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HeavyKeeper (Gong et al., USENIX ATC'18) top-k of flows: ROWS rows of
 * WIDTH buckets {fingerprint, count}. A packet's flow, in each row: its
 * bucket holds its fingerprint -> count + 1; holds nothing -> the flow
 * takes it with count 1; holds another flow -> that count decays by one
 * with probability 1.08^-count ("exponential decay": elephants keep their
 * buckets, mice lose theirs), and the flow takes the bucket when it
 * reaches 0. The flow's estimate (its largest count) then competes for the
 * TOPK table {flow id, estimate}: a flow already in it raises its entry,
 * another replaces the smallest entry when its estimate is larger. A
 * packet of a top-k flow whose estimate reached HEAVY is dropped (the
 * enforcement of a heavy-hitter detector), the rest pass. A control plane
 * reads the top-k table and the sketch.
 *
 * Decay decisions come from a xorshift32 state in a map, so every engine
 * (and the kernel) makes the same ones; 2^32 * 1.08^-c is a table.
 *
 * Built twice: plain eBPF (table CRC32C, slot loops over the top-k table)
 * and with -DUSE_KFUNCS (bpfjet_crc32c, bpfjet_find_u32 for the flow's
 * top-k entry, bpfjet_argmin_u32 for the smallest one).
 */
#include "nf.h"
#ifdef USE_KFUNCS
#include "../../include/bpfjet_kfuncs.h"
#endif

#ifndef ROWS
#define ROWS 2
#endif
#define WIDTH 1024
#define TOPK 16
#define HEAVY 48
#define DECAY_MAX 128
#define SEED_FP 0x27d4eb2fu

struct hk_bucket {
	__u32 fp;
	__u32 count;
};

struct sketch {
	struct hk_bucket b[ROWS * WIDTH];
};

struct topk {
	__u32 id[TOPK];
	__u32 est[TOPK];
};

#define ARRAY_ONE(name, vtype)                          \
	struct {                                        \
		__uint(type, BPF_MAP_TYPE_ARRAY);       \
		__uint(max_entries, 1);                 \
		__type(key, __u32);                     \
		__type(value, vtype);                   \
	} name SEC(".maps")

ARRAY_ONE(sketch, struct sketch);
ARRAY_ONE(topk, struct topk);
ARRAY_ONE(rng, __u32);

static const __u32 seeds[4] = {0x84222325, 0xcbf29ce4, 0x9e3779b9, 0x7f4a7c15};

/* 2^32 * 1.08^-c, rounded (c = 0 saturated). */
static const __u32 decay[DECAY_MAX] = {
	0xffffffff, 0xed097b42, 0xdb7a8e93, 0xcb3896fa, 0xbc2aea9b, 0xae3ab34d,
	0xa152cbf2, 0x955fa065, 0x8a4f0fc6, 0x801050fa, 0x7693d933, 0x6dcb445f,
	0x65a93f4e, 0x5e217381, 0x5728746e, 0x50b3ae2d, 0x4ab9556c, 0x45305894,
	0x40105204, 0x3b517b59, 0x36eca19e, 0x32db1a63, 0x2f16b99e, 0x2b99c850,
	0x285efbd8, 0x25616dee, 0x229c9532, 0x200c3e4b, 0x1dac8588, 0x1b79d0f9,
	0x1970caf9, 0x178e5d20, 0x15cfab8f, 0x143210a1, 0x12b318e1, 0x11507f55,
	0x10082a0c, 0x0ed826ef, 0x0dbea8ca, 0x0cba0495, 0x0bc8aee9, 0x0ae939a8,
	0x0a1a51d5, 0x095abd8c, 0x08a95a2c, 0x08051a9b, 0x076d05ac, 0x06e034a9,
	0x065dd1f2, 0x05e517ba, 0x05754edb, 0x050dcdc2, 0x04adf767, 0x04553a69,
	0x04031029, 0x03b6fc00, 0x03708a84, 0x032f50d9, 0x02f2ec0c, 0x02bb007d,
	0x02873957, 0x0257480e, 0x022ae3e7, 0x0201c98a, 0x01dbba9c, 0x01b87d61,
	0x0197dc64, 0x0179a623, 0x015daccb, 0x0143c5ec, 0x012bca39, 0x01159551,
	0x01010584, 0x00edfba0, 0x00dc5ac4, 0x00cc0831, 0x00bceb24, 0x00aeecaf,
	0x00a1f799, 0x0095f838, 0x008adc5a, 0x00809324, 0x00770cfb, 0x006e3b6d,
	0x00661119, 0x005e819c, 0x0057817e, 0x0051061f, 0x004b05ab, 0x00457707,
	0x004051c4, 0x003b8e14, 0x003724bd, 0x00330f0e, 0x002f46d4, 0x002bc653,
	0x0028883a, 0x0025879e, 0x0022bff1, 0x00202cfb, 0x001dcad6, 0x001b95e2,
	0x00198ac8, 0x0017a66d, 0x0015e5f4, 0x001446b2, 0x0012c633, 0x0011622f,
	0x0010188b, 0x000ee751, 0x000dccb3, 0x000cc705, 0x000bd4b9, 0x000af45f,
	0x000a24a4, 0x0009644c, 0x0008b233, 0x00080d4c, 0x0007749c, 0x0006e73b,
	0x00066453, 0x0005eb1d, 0x00057ae2, 0x000512f7, 0x0004b2bf, 0x000459a8,
	0x00040729, 0x0003bac7
};

static __always_inline __u32 flow_hash(const struct flow_key *k, __u32 seed)
{
#ifdef USE_KFUNCS
	return bpfjet_crc32c(k, FLOW_KEY_BYTES, seed);
#else
	return crc32c_plain((const __u8 *)k, seed);
#endif
}

static __always_inline __u32 topk_find(const struct topk *t, __u32 id)
{
#ifdef USE_KFUNCS
	return bpfjet_find_u32(t->id, sizeof(t->id), id);
#else
	__u32 i;
	for (i = 0; i < TOPK; i++)
		if (t->id[i] == id)
			break;
	return i;
#endif
}

/* Index of the first smallest estimate. */
static __always_inline __u32 topk_min(const struct topk *t)
{
#ifdef USE_KFUNCS
	return bpfjet_argmin_u32(t->est, sizeof(t->est));
#else
	__u32 m = 0;
	for (__u32 i = 1; i < TOPK; i++)
		if (t->est[i] < t->est[m])
			m = i;
	return m;
#endif
}

SEC("xdp")
int heavykeeper(struct xdp_md *ctx)
{
	struct flow_key key;
	__u32 zero = 0;
	if (parse_flow(ctx, &key) < 0)
		return XDP_PASS;
	struct sketch *sk = bpf_map_lookup_elem(&sketch, &zero);
	struct topk *t = bpf_map_lookup_elem(&topk, &zero);
	__u32 *x = bpf_map_lookup_elem(&rng, &zero);
	if (!sk || !t || !x)
		return XDP_ABORTED;
	__u32 fp = flow_hash(&key, SEED_FP) | 1;
	__u32 est = 0;
#pragma unroll
	for (int r = 0; r < ROWS; r++) {
		__u32 col = flow_hash(&key, seeds[r]) % WIDTH;
		struct hk_bucket *b = &sk->b[r * WIDTH + col];
		if (b->fp == fp) {
			b->count++;
		} else if (b->count == 0) {
			b->fp = fp;
			b->count = 1;
		} else {
			__u32 s = *x ? *x : 0x2545f491u;
			s ^= s << 13;
			s ^= s >> 17;
			s ^= s << 5;
			*x = s;
			__u32 c = b->count;
			if (c < DECAY_MAX && s < decay[c & (DECAY_MAX - 1)]) {
				b->count = c - 1;
				if (c == 1) {
					b->fp = fp;
					b->count = 1;
				}
			}
		}
		if (b->fp == fp && b->count > est)
			est = b->count;
	}
	__u32 i = topk_find(t, fp);
	if (i < TOPK) {
		if (est > t->est[i])
			t->est[i] = est;
	} else {
		__u32 m = topk_min(t);
		asm volatile("" : "+r"(m));
		m &= TOPK - 1;
		if (est <= t->est[m])
			return XDP_PASS;
		t->id[m] = fp;
		t->est[m] = est;
		i = m;
	}
	asm volatile("" : "+r"(i));
	i &= TOPK - 1;
	return t->est[i] >= HEAVY ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
