/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A skip-list key-value store NF: every UDP packet to port SL_PORT carries
 * one request { op, status, key, value }; the program parses it, runs it on
 * an ordered store kept in a skip list, writes the answer into the packet
 * and sends it back (XDP_TX, MACs swapped). Other traffic passes; a short
 * or unknown request is dropped.
 *
 *   PUT  insert or update key           status 1, or 2 when the store is full
 *   GET  value of key                   status 1 and the value, 0 if absent
 *   DEL  remove key                     status 1, 0 if absent
 *   SUCC smallest key >= key (ordered)  status 1 with key and value, 0 if none
 *
 * The skip list (Pugh, CACM'90): MAX_LEVEL linked levels over nodes sorted by
 * key, a node of height h present on levels 0..h-1, a head node on all of
 * them; a search walks right while the next key is smaller and down
 * otherwise, O(log n) steps. Heights are geometric (p = 1/2) from a hash of
 * the key, so a given sequence of requests builds the same list on every
 * engine. A search starts at the tallest height in use (the list's level),
 * not at MAX_LEVEL.
 *
 * Only the kfunc build exists: plain eBPF has no allocator and cannot
 * store a pointer in a map, so it cannot link nodes (docs/SUPPORT.md, "Node
 * memory"). bpfjet's node memory kfuncs give nodes from a pool in the map
 * value, links between them, and data references the verifier tracks.
 * The walk is a bpf_loop callback (its step count is not a constant); the
 * nodes before the key on each level are kept in the map value (`update`).
 * One store, one worker: index the map by CPU for one store per CPU slot.
 */
#include "nf.h"
#include "../../include/bpfjet_kfuncs.h"

#ifndef NODES
#define NODES 4096
#endif
#define MAX_LEVEL 16
#define SL_PORT 9000

enum { OP_PUT = 1, OP_GET = 2, OP_DEL = 3, OP_SUCC = 4 };
enum { ST_MISS = 0, ST_OK = 1, ST_FULL = 2 };

struct kv_msg {
	__u8 op;
	__u8 status;
	__u16 pad;
	__u32 pad2;
	__u64 key;
	__u64 value;
} __attribute__((packed));

struct sl_node {
	__u64 key;
	__u64 value;
	__u32 height;
	__u32 pad;
};

/* NODES keys plus the head. */
#define POOL_BYTES BPFJET_NODE_POOL_BYTES(NODES + 1, sizeof(struct sl_node), MAX_LEVEL)

struct store {
	__u64 head;		/* handle of the head node */
	__u32 count;		/* keys stored */
	__u32 level;		/* levels in use: no node is taller (Pugh's list level) */
	__u64 update[MAX_LEVEL];	/* last node before the key, per level */
	__u8 pool[POOL_BYTES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct store);
	__uint(max_entries, 1);
} store SEC(".maps");

/* The search state a bpf_loop step carries. */
struct walk {
	__u64 key;
	__u64 cur;	/* the last node with a key below `key` */
	__u64 next0;	/* the first node with a key >= `key` (0: none) */
	__s32 level;
	__u32 pad;
};

static __always_inline struct store *the_store(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&store, &zero);
}

/* The key of node `n`, or ~0 (larger than any) if it has no data. */
static __always_inline __u64 key_of(struct store *st, __u64 n)
{
	struct sl_node *d = bpfjet_node_data(st->pool, sizeof(st->pool), n, sizeof(*d));
	__u64 k = ~0ULL;
	if (d) {
		k = d->key;
		bpfjet_node_put(d);
	}
	return k;
}

/* One step: right while the next key is below the search key, else note
 * the node for this level and go down. */
static long walk_step(__u64 i, void *ctx)
{
	struct walk *w = ctx;
	struct store *st = the_store();
	if (!st || w->level < 0)
		return 1;
	__u32 level = w->level & (MAX_LEVEL - 1);
	__u64 nx = bpfjet_node_next(st->pool, sizeof(st->pool), w->cur, level);
	if (nx && key_of(st, nx) < w->key) {
		w->cur = nx;
		return 0;
	}
	st->update[level] = w->cur;
	if (level == 0) {
		w->next0 = nx;
		w->level = -1;
		return 1;
	}
	w->level = level - 1;
	return 0;
}

static __always_inline __u32 height_of(__u64 key)
{
	__u64 h = key * 0x9e3779b97f4a7c15ULL;
	h ^= h >> 29;
	/* 1 + trailing zeros: level l with probability 2^-l, capped. */
	return 1 + bpfjet_ctz64((h >> 16) | (1ULL << (MAX_LEVEL - 1)));
}

static __always_inline int sl_put(struct store *st, __u64 key, __u64 value, __u64 found)
{
	if (found) {
		struct sl_node *d = bpfjet_node_data(st->pool, sizeof(st->pool), found, sizeof(*d));
		if (!d)
			return ST_MISS;
		d->value = value;
		bpfjet_node_put(d);
		return ST_OK;
	}
	__u64 n = bpfjet_node_alloc(st->pool, sizeof(st->pool));
	if (!n)
		return ST_FULL;
	__u32 height = height_of(key);
	struct sl_node *d = bpfjet_node_data(st->pool, sizeof(st->pool), n, sizeof(*d));
	if (!d)
		return ST_MISS;
	d->key = key;
	d->value = value;
	d->height = height;
	bpfjet_node_put(d);
	for (__u32 l = 0; l < MAX_LEVEL; l++) {
		if (l >= height)
			break;
		/* Above the list's level the walk noted nothing: the head. */
		__u64 prev = l < st->level ? st->update[l] : st->head;
		__u64 after = bpfjet_node_next(st->pool, sizeof(st->pool), prev, l);
		if (after)
			bpfjet_node_connect(st->pool, sizeof(st->pool), n, l, after);
		bpfjet_node_connect(st->pool, sizeof(st->pool), prev, l, n);
	}
	if (height > st->level)
		st->level = height;
	st->count++;
	return ST_OK;
}

static __always_inline int sl_del(struct store *st, __u64 found)
{
	for (__u32 l = 0; l < MAX_LEVEL; l++) {
		if (l >= st->level)
			break;
		__u64 prev = st->update[l];
		if (bpfjet_node_next(st->pool, sizeof(st->pool), prev, l) != found)
			continue;
		__u64 after = bpfjet_node_next(st->pool, sizeof(st->pool), found, l);
		if (after)
			bpfjet_node_connect(st->pool, sizeof(st->pool), prev, l, after);
		else
			bpfjet_node_disconnect(st->pool, sizeof(st->pool), prev, l);
	}
	bpfjet_node_free(st->pool, sizeof(st->pool), found);
	st->count--;
	return ST_OK;
}

#ifdef PREFILL
/* Benchmark builds (-DPREFILL=N): an empty store is first filled with the
 * keys 0, 2, ..., 2(N-1) (value = key / 2), appended in order: `update`
 * holds each level's last node. */
static long fill_step(__u64 i, void *ctx)
{
	struct store *st = the_store();
	if (!st)
		return 1;
	__u64 n = bpfjet_node_alloc(st->pool, sizeof(st->pool));
	if (!n)
		return 1;
	__u32 height = height_of(2 * i);
	struct sl_node *d = bpfjet_node_data(st->pool, sizeof(st->pool), n, sizeof(*d));
	if (!d)
		return 1;
	d->key = 2 * i;
	d->value = i;
	d->height = height;
	bpfjet_node_put(d);
	for (__u32 l = 0; l < MAX_LEVEL; l++) {
		if (l >= height)
			break;
		bpfjet_node_connect(st->pool, sizeof(st->pool), st->update[l], l, n);
		st->update[l] = n;
	}
	if (height > st->level)
		st->level = height;
	st->count++;
	return 0;
}

static __always_inline void prefill(struct store *st)
{
	if (st->count)
		return;
	for (__u32 l = 0; l < MAX_LEVEL; l++)
		st->update[l] = st->head;
	bpf_loop(PREFILL, fill_step, 0, 0);
}
#endif

SEC("xdp")
int skiplist(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	__u16 *udp = (void *)(ip + 1);
	if ((void *)(udp + 4) > end || udp[1] != bpf_htons(SL_PORT))
		return XDP_PASS;
	struct kv_msg *m = (void *)(udp + 4);
	if ((void *)(m + 1) > end || m->op < OP_PUT || m->op > OP_SUCC)
		return XDP_DROP;

	struct store *st = the_store();
	if (!st)
		return XDP_ABORTED;
	if (bpfjet_node_pool_init(st->pool, sizeof(st->pool), sizeof(struct sl_node), MAX_LEVEL) < 0)
		return XDP_ABORTED;
	/* A head on all levels; a new one when the pool was (re)laid out. */
	struct sl_node *hd = 0;
	if (st->head)
		hd = bpfjet_node_data(st->pool, sizeof(st->pool), st->head, sizeof(*hd));
	if (hd) {
		bpfjet_node_put(hd);
	} else {
		st->head = bpfjet_node_alloc(st->pool, sizeof(st->pool));
		st->count = 0;
		st->level = 1;
		if (!st->head)
			return XDP_ABORTED;
	}
#ifdef PREFILL
	prefill(st);
#endif

	__u64 key = m->key;
	__u32 top = st->level;
	if (top < 1 || top > MAX_LEVEL)
		return XDP_ABORTED;	/* the map was written by someone else */
	struct walk w = { .key = key, .cur = st->head, .level = top - 1 };
	bpf_loop(NODES + 2 * MAX_LEVEL, walk_step, &w, 0);
	if (w.level >= 0)
		return XDP_ABORTED;	/* not enough steps: cannot happen */

	__u64 next_key = ~0ULL, next_value = 0;
	if (w.next0) {
		struct sl_node *d = bpfjet_node_data(st->pool, sizeof(st->pool), w.next0, sizeof(*d));
		if (d) {
			next_key = d->key;
			next_value = d->value;
			bpfjet_node_put(d);
		}
	}
	__u64 found = w.next0 && next_key == key ? w.next0 : 0;

	int status = ST_MISS;
	switch (m->op) {
	case OP_PUT:
		status = sl_put(st, key, m->value, found);
		break;
	case OP_GET:
		if (found) {
			status = ST_OK;
			m->value = next_value;
		}
		break;
	case OP_DEL:
		if (found)
			status = sl_del(st, found);
		break;
	case OP_SUCC:
		if (w.next0) {
			status = ST_OK;
			m->key = next_key;
			m->value = next_value;
		}
		break;
	}
	m->status = status;

	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
