/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Eiffel (Saeed et al., NSDI'19) circular cFFS priority queue, as a packet
 * scheduler works it per batch: NPRIO priority buckets (a power of two,
 * 64..65536), each a FIFO of at most CAP packet ids, and a hierarchy of
 * occupancy bitmaps over them — 64-bit words, a bit per bucket at the
 * bottom, a bit per non-empty word above: two levels up to 4096 buckets,
 * three above (65536: 1024 bottom words, 16 middle words, a top word).
 *
 * Every frame stands for a batch of BATCH packets of its flow (a GRO
 * burst). Each gets a rank — the queue's virtual time plus a per-packet
 * offset below NPRIO / 2 from a multiplicative hash of the flow and the
 * packet's number, a stand-in for a policy's rank function (a virtual
 * finish time) — and is enqueued in bucket rank % NPRIO (dropped when the
 * bucket is full). Then, while more than DEPTH packets are queued, the
 * lowest rank leaves: the first occupied bucket at or after the virtual
 * time's bucket, circularly — the "find next set" walk of the hierarchy,
 * up from the bottom word until a level has a bit beyond the position,
 * then down by find-first-set (wrapping to the lowest bucket when none is
 * beyond) — then a pop; the virtual time moves to that rank. Queued ranks
 * stay within NPRIO of the virtual time, so a bucket holds one rank.
 * The verdict: XDP_TX when a packet of the frame's own batch left at
 * once, else XDP_DROP when one was dropped, else XDP_PASS. One queue per
 * CPU slot (per-CPU maps): no lock.
 *
 * Built twice: plain eBPF (runs in the kernel too: find-first-set by de
 * Bruijn multiplication and a table) and with -DUSE_KFUNCS (bpfjet_ctz64,
 * which the JIT compiles to one tzcnt, as eNetSTL's Eiffel uses its ffs
 * kfunc). Both keep the same rings, bitmap hierarchy and statistics, which
 * a control plane reads.
 */
#include "nf.h"
#ifdef USE_KFUNCS
#include "../../include/bpfjet_kfuncs.h"
#endif

#ifndef NPRIO
#define NPRIO 4096
#endif
#if NPRIO < 64 || NPRIO > 65536 || (NPRIO & (NPRIO - 1))
#error "NPRIO must be a power of two of 64..65536"
#endif
#define L0_WORDS (NPRIO / 64)
#if NPRIO > 4096
#define THREE_LEVELS 1
#define L1_WORDS (NPRIO / 4096)
#endif
#define SPREAD (NPRIO / 2 < HORIZON ? NPRIO / 2 : HORIZON)
#define HORIZON 512
#define BATCH 8
#define DEPTH 128
#define CAP 8
/* Benchmark builds (-DSTEADY_VERDICT) do the same work but answer XDP_PASS
 * for every frame: which packets leave at once depends on how many runs
 * came before, which differs between engines. */
#ifdef STEADY_VERDICT
#define VERDICT(v) XDP_PASS
#else
#define VERDICT(v) (v)
#endif
/* Both loops are unrolled (straight-line code for both verifiers and both
 * JITs); examples/verifier/scale_eiffel_rolled.c builds them rolled. */
#ifdef ROLLED_LOOPS
#define UNROLL
#else
#define UNROLL _Pragma("unroll")
#endif

/* top: bit m says mid[m] (three levels) or words[m] (two) is non-zero;
 * mid[m]: bit b says words[m * 64 + b] is; words[w]: bit b says bucket
 * w * 64 + b holds packets. */
struct occupancy {
	__u64 top;
#ifdef THREE_LEVELS
	__u64 mid[L1_WORDS];
#endif
	__u64 words[L0_WORDS];
};

struct stats {
	__u64 enqueued;
	__u64 dequeued;
	__u64 dropped;
	__u64 queued;
	__u64 vtime;
	__u64 rank_sum;
	__u64 id_xor;
};

struct bucket {
	__u32 head;
	__u32 len;
	__u32 ids[CAP];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct occupancy);
} occupancy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NPRIO);
	__type(key, __u32);
	__type(value, struct bucket);
} queues SEC(".maps");

#ifdef USE_KFUNCS
#define ctz64(x) bpfjet_ctz64(x)
#else
static const __u8 debruijn64[64] = {
	0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4,
	62, 55, 59, 36, 53, 51, 43, 22, 45, 39, 33, 30, 24, 18, 12, 5,
	63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23, 11,
	46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6,
};
/* Trailing zeros of x != 0: isolate the lowest bit, de Bruijn multiply. */
static __always_inline __u64 ctz64(__u64 x)
{
	return debruijn64[((x & -x) * 0x03f79d71b4cb0a89ull) >> 58];
}
#endif

/* A bit index for the verifier: clang knows the de Bruijn table's values
 * and would drop the mask, the kernel's verifier needs it spelled out. */
static __always_inline __u32 bit_of(__u64 word)
{
	__u32 b = ctz64(word);
	asm volatile("" : "+r"(b));
	return b & 63;
}

/* v % n (n a power of two) in a form the kernel's verifier tracks across
 * the map lookup (clang knows the bound already and would drop it). */
static __always_inline __u32 below(__u32 v, __u32 n)
{
	asm volatile("" : "+r"(v));
	return v & (n - 1);
}

/* The first occupied bucket at or after bucket p, circularly; -1 if the
 * queue is empty. */
static __always_inline int first_from(const struct occupancy *o, __u32 p)
{
	__u32 w = p / 64 % L0_WORDS;
	__u64 x = o->words[w] & (~0ull << (p % 64));
	if (x)
		return w * 64 + bit_of(x);
#ifdef THREE_LEVELS
	__u32 m = w / 64;
	__u64 y = o->mid[m] & ((~0ull << (w % 64)) << 1);
	if (!y) {
		__u64 z = o->top & ((~0ull << m) << 1);
		if (!z)
			z = o->top;
		if (!z)
			return -1;
		m = bit_of(z) % L1_WORDS;
		y = o->mid[m];
	}
	w = (m * 64 + bit_of(y)) % L0_WORDS;
#else
	__u64 z = o->top & ((~0ull << w) << 1);
	if (!z)
		z = o->top;
	if (!z)
		return -1;
	w = bit_of(z) % L0_WORDS;
#endif
	return w * 64 + bit_of(o->words[w]);
}

SEC("xdp")
int eiffel(struct xdp_md *ctx)
{
	struct flow_key key;
	__u32 zero = 0;
	if (parse_flow(ctx, &key) < 0)
		return XDP_PASS;
	struct occupancy *o = bpf_map_lookup_elem(&occupancy, &zero);
	struct stats *st = bpf_map_lookup_elem(&stats, &zero);
	if (!o || !st)
		return XDP_ABORTED;
	__u32 h = ((__u32)key.sport << 16 ^ key.dport ^ key.saddr ^ key.daddr) * 0x9e3779b1u;
	__u64 enqueued = st->enqueued, dequeued = st->dequeued, dropped = st->dropped;
	__u64 queued = st->queued, vtime = st->vtime;
	__u64 rank_sum = st->rank_sum, id_xor = st->id_xor;
	__u32 first_id = enqueued + dropped;
	int sent = 0, lost = 0;

	UNROLL
	for (__u32 i = 0; i < BATCH; i++) {
		__u32 id = first_id + i;
		__u32 r = (h ^ id) * 0x85ebca6bu;
		r ^= r >> 15;
		__u32 slot = (__u32)(vtime + 1 + r % SPREAD) % NPRIO;
		__u32 key = slot;
		struct bucket *b = bpf_map_lookup_elem(&queues, &key);
		if (!b)
			return XDP_ABORTED;
		slot = below(slot, NPRIO);
		if (b->len >= CAP) {
			dropped++;
			lost = 1;
			continue;
		}
		b->ids[(b->head + b->len) % CAP] = id;
		b->len++;
		o->words[slot / 64] |= 1ull << (slot % 64);
#ifdef THREE_LEVELS
		o->mid[slot / 4096] |= 1ull << (slot / 64 % 64);
		o->top |= 1ull << (slot / 4096);
#else
		o->top |= 1ull << (slot / 64);
#endif
		enqueued++;
		queued++;
	}

	UNROLL
	for (__u32 i = 0; i < BATCH && queued > DEPTH; i++) {
		int f = first_from(o, vtime % NPRIO);
		if (f < 0)
			return XDP_ABORTED;
		__u32 slot = (__u32)f % NPRIO;
		__u32 key = slot;
		struct bucket *b = bpf_map_lookup_elem(&queues, &key);
		if (!b || !b->len)
			return XDP_ABORTED;
		slot = below(slot, NPRIO);
		__u32 out = b->ids[b->head % CAP];
		b->head = (b->head + 1) % CAP;
		b->len--;
		if (!b->len) {
			__u64 word = o->words[slot / 64] & ~(1ull << (slot % 64));
			o->words[slot / 64] = word;
#ifdef THREE_LEVELS
			if (!word) {
				__u64 mid = o->mid[slot / 4096] & ~(1ull << (slot / 64 % 64));
				o->mid[slot / 4096] = mid;
				if (!mid)
					o->top &= ~(1ull << (slot / 4096));
			}
#else
			if (!word)
				o->top &= ~(1ull << (slot / 64));
#endif
		}
		vtime += (slot - vtime) % NPRIO;
		dequeued++;
		queued--;
		rank_sum += vtime;
		id_xor ^= out;
		if (out - first_id < BATCH)
			sent = 1;
	}

	st->enqueued = enqueued;
	st->dequeued = dequeued;
	st->dropped = dropped;
	st->queued = queued;
	st->vtime = vtime;
	st->rank_sum = rank_sum;
	st->id_xor = id_xor;
	if (sent)
		return VERDICT(XDP_TX);
	return lost ? VERDICT(XDP_DROP) : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
