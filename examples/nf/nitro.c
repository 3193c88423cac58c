/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NitroSketch (Liu et al., SIGCOMM'19) of flows: a count sketch of NROWS
 * rows x WIDTH signed counters where each (packet, row) pair is updated
 * only with probability 1/INV, by +-INV (unbiased). Which pairs are updated
 * is decided by geometric sampling: a countdown of pairs to skip, redrawn
 * after each sampled pair, so most packets touch no counter and compute no
 * hash. A flow whose estimate exceeds HEAVY in a row a packet of it updates
 * goes into the `heavy` table, and from then on its packets are dropped
 * (a heavy-hitter filter: the sketch detects, the table enforces); the rest
 * pass.
 *
 * Built twice, drawing the same counts from the same seed (per CPU slot):
 * plain eBPF (runs in the kernel too: the countdown, xorshift32 draws and
 * fixed-point log2 geometric counts in a per-CPU map, table CRC32C) and
 * with -DUSE_KFUNCS (bpfjet_geo_should_do over a per-CPU bpfjet_geo_pool,
 * counts pre-generated 64 at a time and taken in place by the JIT's inline
 * form; a packet whose rows are all skipped decrements the countdown once;
 * bpfjet_crc32c). Both keep the same
 * sketch layout: row i, column crc32c(key, SEEDS[i]) % WIDTH, sign from the
 * hash's top bit.
 */
#include "nf.h"
#ifdef USE_KFUNCS
#include "../../include/bpfjet_kfuncs.h"
#else
#include "geo_log2.h"
#endif

#define NROWS 4
#define WIDTH 1024
#ifndef INV
#define INV 16
#endif
#ifndef HEAVY
#define HEAVY 128
#endif
#define SEED 0x2545f491u

/* -log2(1 - 1/INV) in Q16 (BPFJET_GEO_SCALE_1_IN_*). */
#if INV == 2
#define SCALE 65536
#elif INV == 4
#define SCALE 27200
#elif INV == 8
#define SCALE 12625
#elif INV == 16
#define SCALE 6102
#elif INV == 32
#define SCALE 3002
#elif INV == 64
#define SCALE 1489
#else
#error "INV must be a power of two from 2 to 64"
#endif

struct sketch {
	__s32 rows[NROWS * WIDTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sketch);
} sketch SEC(".maps");

/* Flows found heavy -> packets dropped since. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct flow_key);
	__type(value, __u64);
} heavy SEC(".maps");

#ifdef USE_KFUNCS
typedef struct bpfjet_geo_pool sampler_t;
#else
/* The plain sampler: the same countdown and generator as bpfjet's pool,
 * one draw at a time. */
typedef struct {
	__u32 countdown;
	__u32 state;
} sampler_t;
#endif

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, sampler_t);
} sampler SEC(".maps");

static const __u32 seeds[NROWS] = {0x84222325, 0xcbf29ce4, 0x9e3779b9, 0x7f4a7c15};

#ifndef USE_KFUNCS
/* floor(-log2(u / 2^32) in Q16 / SCALE), u > 0: bpfjet's geometric count. */
static __always_inline __u32 geo_count(__u32 u)
{
	__u32 e = 0, x = u;
	if (x >= 1u << 16) { e += 16; x >>= 16; }
	if (x >= 1u << 8) { e += 8; x >>= 8; }
	if (x >= 1u << 4) { e += 4; x >>= 4; }
	if (x >= 1u << 2) { e += 2; x >>= 2; }
	if (x >= 1u << 1) e += 1;
	__u32 frac = (e >= 8 ? u >> (e - 8) : u << (8 - e)) & 0xff;
	return (((32 - e) << 16) - geo_log2_frac[frac]) / SCALE;
}

static __always_inline __u32 xorshift32(__u32 x)
{
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

static __always_inline int should_do(sampler_t *s)
{
	if (s->countdown) {
		s->countdown--;
		return 0;
	}
	s->state = xorshift32(s->state);
	s->countdown = geo_count(s->state);
	return 1;
}
#endif

SEC("xdp")
int nitro(struct xdp_md *ctx)
{
	struct flow_key key;
	__u32 zero = 0;
	if (parse_flow(ctx, &key) < 0)
		return XDP_PASS;
	__u64 *dropped = bpf_map_lookup_elem(&heavy, &key);
	if (dropped) {
		__sync_fetch_and_add(dropped, 1);
		return XDP_DROP;
	}
	struct sketch *sk = bpf_map_lookup_elem(&sketch, &zero);
	sampler_t *s = bpf_map_lookup_elem(&sampler, &zero);
	if (!sk || !s)
		return XDP_ABORTED;
#ifdef USE_KFUNCS
	if (!s->scale)
		bpfjet_geo_init(s, SCALE, SEED);
#else
	if (!s->state) {
		s->state = xorshift32(SEED);
		s->countdown = geo_count(s->state);
	}
#endif
	int verdict = XDP_PASS;
#ifdef USE_KFUNCS
	/* A packet whose (packet, row) pairs are all skipped — most of them
	 * once p <= 1/NROWS — pays one countdown update, not one per row
	 * (the pool's layout is public; the same countdown the rows' calls
	 * would have left). */
	if (s->countdown >= NROWS && s->scale) {
		s->countdown -= NROWS;
		return XDP_PASS;
	}
#endif
#pragma unroll
	for (int i = 0; i < NROWS; i++) {
#ifdef USE_KFUNCS
		if (!bpfjet_geo_should_do(s))
			continue;
		__u32 h = bpfjet_crc32c(&key, FLOW_KEY_BYTES, seeds[i]);
#else
		if (!should_do(s))
			continue;
		__u32 h = crc32c_plain((const __u8 *)&key, seeds[i]);
#endif
		__s32 *c = &sk->rows[i * WIDTH + h % WIDTH];
		__s32 v = h >> 31 ? -INV : INV;
		__s32 now = __sync_fetch_and_add(c, v) + v;
		if ((h >> 31 ? -now : now) > HEAVY)
			verdict = XDP_DROP;
	}
	if (verdict == XDP_DROP) {
		__u64 one = 1;
		bpf_map_update_elem(&heavy, &key, &one, BPF_ANY);
	}
	return verdict;
}

char _license[] SEC("license") = "GPL";
