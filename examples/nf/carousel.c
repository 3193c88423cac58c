/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Carousel (Saeed et al., SIGCOMM'17) pacing with a two-level timing
 * wheel. Time is virtual: one tick per packet (so every engine, and the
 * kernel, sees the same clock). Each flow (FLOWS pacing slots, by hash) may
 * send one packet every `interval` ticks (2..17, from its hash): a packet
 * gets timestamp ts = max(now, the flow's next allowed time). ts == now:
 * it goes out at once (XDP_TX). Otherwise it is queued (XDP_PASS: held) as
 * {id, ts}: in the fine wheel (FINE one-tick slots) when ts is in the
 * current period of FINE ticks, in the coarse wheel (COARSE slots of one
 * period each) when it is in one of the next COARSE - 1 periods; further
 * out, or into a full slot, it is dropped. Every tick first cascades the
 * coarse slot of a period that starts now into the fine wheel, then
 * releases the fine slot of this tick (the dequeued packets' ids and
 * timestamps go into the statistics a control plane reads, with the
 * flows' pacing state).
 *
 * Built twice: plain eBPF (runs in the kernel too: a ring per slot) and
 * with -DUSE_KFUNCS (bpfjet's list-buckets: one node pool for both wheels,
 * push / pop / len compiled in by the JIT; bpfjet_crc32c). Both enforce
 * the same per-slot capacities.
 */
#include "nf.h"
#ifdef USE_KFUNCS
#include "../../include/bpfjet_kfuncs.h"
#endif

#ifndef FINE
#define FINE 256
#endif
#define COARSE 16
#define CAP 4
#define CAP_COARSE 16
#define FLOWS 1024
/* Benchmark builds (-DSTEADY_VERDICT) do the same work but answer XDP_PASS
 * for every packet: with one flow arriving every tick, which of admit and
 * drop the last of N runs hits depends on N, which differs by engine. */
#ifdef STEADY_VERDICT
#define VERDICT(v) ((void)(v), XDP_PASS)
#else
#define VERDICT(v) (v)
#endif

struct elem {
	__u32 id;
	__u32 ts;
};

struct stats {
	__u64 now;
	__u64 sent_now;
	__u64 enqueued;
	__u64 dequeued;
	__u64 dropped;
	__u64 cascaded;
	__u64 cascade_dropped;
	__u64 id_xor;
	__u64 ts_sum;
};

#ifdef USE_KFUNCS
struct queues {
	__u8 lists[BPFJET_BKTLIST_BYTES(FINE + COARSE, FINE * CAP + COARSE * CAP_COARSE,
					sizeof(struct elem))];
};
#else
struct fine_slot {
	__u32 head;
	__u32 len;
	struct elem e[CAP];
};
struct coarse_slot {
	__u32 head;
	__u32 len;
	struct elem e[CAP_COARSE];
};
struct queues {
	struct fine_slot fine[FINE];
	struct coarse_slot coarse[COARSE];
};
#endif

#define PERCPU_ONE(name, vtype)                                 \
	struct {                                                \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);        \
		__uint(max_entries, 1);                         \
		__type(key, __u32);                             \
		__type(value, vtype);                           \
	} name SEC(".maps")

PERCPU_ONE(stats, struct stats);
PERCPU_ONE(queues, struct queues);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLOWS);
	__type(key, __u32);
	__type(value, __u32);
} next_send SEC(".maps");

static __always_inline __u32 flow_hash(const struct flow_key *k)
{
#ifdef USE_KFUNCS
	return bpfjet_crc32c(k, FLOW_KEY_BYTES, 0xc2b2ae35);
#else
	return crc32c_plain((const __u8 *)k, 0xc2b2ae35);
#endif
}

#ifdef USE_KFUNCS
#define SZ sizeof(q->lists)
static __always_inline __u32 fine_len(struct queues *q, __u32 s)
{
	return bpfjet_bktlist_len(q->lists, SZ, s);
}
static __always_inline __u32 coarse_len(struct queues *q, __u32 s)
{
	return bpfjet_bktlist_len(q->lists, SZ, FINE + s);
}
static __always_inline int fine_push(struct queues *q, __u32 s, struct elem *e)
{
	return bpfjet_bktlist_push(q->lists, SZ, s, e, sizeof(*e));
}
static __always_inline int coarse_push(struct queues *q, __u32 s, struct elem *e)
{
	return bpfjet_bktlist_push(q->lists, SZ, FINE + s, e, sizeof(*e));
}
static __always_inline int fine_pop(struct queues *q, __u32 s, struct elem *e)
{
	return bpfjet_bktlist_pop(q->lists, SZ, s, e, sizeof(*e));
}
static __always_inline int coarse_pop(struct queues *q, __u32 s, struct elem *e)
{
	return bpfjet_bktlist_pop(q->lists, SZ, FINE + s, e, sizeof(*e));
}
#else
static __always_inline __u32 fine_len(struct queues *q, __u32 s)
{
	return q->fine[s % FINE].len;
}
static __always_inline __u32 coarse_len(struct queues *q, __u32 s)
{
	return q->coarse[s % COARSE].len;
}
static __always_inline int fine_push(struct queues *q, __u32 s, struct elem *e)
{
	struct fine_slot *f = &q->fine[s % FINE];
	if (f->len >= CAP)
		return -1;
	f->e[(f->head + f->len) % CAP] = *e;
	f->len++;
	return 0;
}
static __always_inline int coarse_push(struct queues *q, __u32 s, struct elem *e)
{
	struct coarse_slot *c = &q->coarse[s % COARSE];
	if (c->len >= CAP_COARSE)
		return -1;
	c->e[(c->head + c->len) % CAP_COARSE] = *e;
	c->len++;
	return 0;
}
static __always_inline int fine_pop(struct queues *q, __u32 s, struct elem *e)
{
	struct fine_slot *f = &q->fine[s % FINE];
	if (!f->len)
		return -1;
	*e = f->e[f->head % CAP];
	f->head = (f->head + 1) % CAP;
	f->len--;
	return 0;
}
static __always_inline int coarse_pop(struct queues *q, __u32 s, struct elem *e)
{
	struct coarse_slot *c = &q->coarse[s % COARSE];
	if (!c->len)
		return -1;
	*e = c->e[c->head % CAP_COARSE];
	c->head = (c->head + 1) % CAP_COARSE;
	c->len--;
	return 0;
}
#endif

SEC("xdp")
int carousel(struct xdp_md *ctx)
{
	struct flow_key key;
	__u32 zero = 0;
	if (parse_flow(ctx, &key) < 0)
		return XDP_PASS;
	struct stats *st = bpf_map_lookup_elem(&stats, &zero);
	struct queues *q = bpf_map_lookup_elem(&queues, &zero);
	if (!st || !q)
		return XDP_ABORTED;
#ifdef USE_KFUNCS
	if (!*(__u32 *)q->lists &&
	    bpfjet_bktlist_init(q->lists, sizeof(q->lists), FINE + COARSE, sizeof(struct elem)) <
		    FINE * CAP + COARSE * CAP_COARSE)
		return XDP_ABORTED;
#endif
	__u32 now = st->now;
	struct elem e;

	/* A period starts: its coarse slot moves into the fine wheel. */
	if (now % FINE == 0) {
		__u32 c = (now / FINE) % COARSE;
		for (int i = 0; i < CAP_COARSE; i++) {
			if (coarse_pop(q, c, &e))
				break;
			if (fine_len(q, e.ts % FINE) >= CAP || fine_push(q, e.ts % FINE, &e)) {
				st->cascade_dropped++;
				continue;
			}
			st->cascaded++;
		}
	}
	/* This tick's fine slot is released. */
	for (int i = 0; i < CAP; i++) {
		if (fine_pop(q, now % FINE, &e))
			break;
		st->dequeued++;
		st->id_xor ^= e.id;
		st->ts_sum += e.ts;
	}
	st->now = now + 1;

	/* Admission of this packet. */
	__u32 h = flow_hash(&key);
	__u32 f = h % FLOWS;
	__u32 *next = bpf_map_lookup_elem(&next_send, &f);
	if (!next)
		return XDP_ABORTED;
	__u32 ts = *next > now ? *next : now;
	__u32 interval = 2 + (h >> 28);
	int verdict;
	e.id = st->sent_now + st->enqueued + st->dropped;
	e.ts = ts;
	if (ts == now) {
		st->sent_now++;
		verdict = XDP_TX;
	} else if (ts / FINE == now / FINE) {
		if (fine_len(q, ts % FINE) >= CAP || fine_push(q, ts % FINE, &e))
			goto drop;
		st->enqueued++;
		verdict = XDP_PASS;
	} else if (ts / FINE - now / FINE < COARSE) {
		__u32 c = (ts / FINE) % COARSE;
		if (coarse_len(q, c) >= CAP_COARSE || coarse_push(q, c, &e))
			goto drop;
		st->enqueued++;
		verdict = XDP_PASS;
	} else {
		goto drop;
	}
	*next = ts + interval;
	return VERDICT(verdict);
drop:
	st->dropped++;
	return VERDICT(XDP_DROP);
}

char _license[] SEC("license") = "GPL";
