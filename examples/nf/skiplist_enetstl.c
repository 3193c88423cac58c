/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The skip-list key-value store of skiplist.c (same UDP requests PUT / GET /
 * DEL / SUCC, same replies, same heights), written on eNetSTL's
 * node-pointer library as eNetSTL's own NF programs use it
 * (chonepieceyb/eNetSTL, src/LKMs/bpf_ptr_structure_lib and
 * src/bpf_kern/exp1-2): the list lives in a node container the map value
 * keeps as a __kptr, taken out with bpf_kptr_xchg on every packet and put
 * back at the end; the head is the container's tmp 0, the search keeps its
 * position in tmp 1 and the last node before the key on level l in tmp
 * l + 2; nodes are read in place through BTF-typed pointers (a cast to the
 * program's view of the node, struct skip_node) and written with
 * ptr_write_data1/2; every node reference taken (ptr_get_out,
 * ptr_container_get_tmp, ptr_alloc_node) is released on every path.
 *
 * Only bpfjet runs it (the kernel has no such module loaded); its
 * reference is the model of crates/cli/tests/nf_nodes.rs. -DPREFILL=N
 * builds (benchmarks) fill an empty store with N keys first, as
 * skiplist.c's.
 */
#include "nf.h"

#ifndef NODES
#define NODES 4096
#endif
#define MAX_LEVEL 16
#define SL_PORT 9000
/* The container's tmp holding the first node >= the key after a search. */
#define NEXT_TMP 31

#define __kptr __attribute__((btf_type_tag("kptr")))

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

/* The module's types, as its programs declare them. */
struct list_head {
	struct list_head *next, *prev;
};

struct ptr_node_container {
	struct list_head node_list;
};

#define PTR_SIZE 16
#define DATA_SIZE1 52
#define DATA_SIZE2 160

struct __node_common {
	struct ptr_node_container *owner;
	int refcnt;
	char data1[DATA_SIZE1];
	struct __node_common *outs[PTR_SIZE];
	struct __node_common *ins[PTR_SIZE];
	unsigned long in_map;
	unsigned long out_map;
	struct list_head node;
	char data2[DATA_SIZE2];
};

typedef struct __node_common ptr_node;

extern struct ptr_node_container *ptr_create_node_container(__u32 tmp_num) __ksym;
extern void ptr_destory_node_container(struct ptr_node_container *c) __ksym;
extern ptr_node *ptr_alloc_node(void) __ksym;
extern void ptr_release_node(ptr_node *node) __ksym;
extern ptr_node *ptr_get_out(ptr_node *parent, __u32 idx) __ksym;
extern int ptr_connect(ptr_node *p1, __u32 idx1, ptr_node *p2, __u32 idx2) __ksym;
extern int ptr_unconnect(ptr_node *p1, __u32 idx1, ptr_node *p2, __u32 idx2) __ksym;
extern int ptr_write_data1(ptr_node *node, __u64 off, void *data__buf, __u64 size__sz) __ksym;
extern int ptr_write_data2(ptr_node *node, __u64 off, void *data__buf, __u64 size__sz) __ksym;
extern void ptr_set_owner(struct ptr_node_container *c, ptr_node *node) __ksym;
extern void ptr_unset_owner(ptr_node *node) __ksym;
extern void ptr_container_set_tmp(struct ptr_node_container *c, ptr_node *node, __u32 idx) __ksym;
extern ptr_node *ptr_container_get_tmp(struct ptr_node_container *c, __u32 idx) __ksym;
extern __u32 bpf_tzcnt_u32(__u32 val) __ksym;

/* The program's view of a node: its fields inside data1 and data2. */
struct skip_node {
	struct ptr_node_container *owner;
	int refcnt;
	int height;
	__u64 key;
	char pad1[DATA_SIZE1 - sizeof(int) - sizeof(__u64)];
	struct __node_common *outs[PTR_SIZE];
	struct __node_common *ins[PTR_SIZE];
	unsigned long in_map;
	unsigned long out_map;
	struct list_head node;
	__u64 value;
	char pad2[DATA_SIZE2 - sizeof(__u64)];
};

#define SN(p) ((struct skip_node *)(p))

struct store {
	struct ptr_node_container __kptr *sl;
	__u32 count;	/* keys stored */
	__u32 level;	/* levels in use: no node is taller */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct store);
	__uint(max_entries, 1);
} store SEC(".maps");

/* The search state a bpf_loop step carries. */
struct walk {
	struct ptr_node_container *sl;
	__u64 key;
	__s32 level;
	__u32 has_next;
};

/* Steps per bpf_loop call: 1, or -DWALK_UNROLL=64 as eNetSTL's own
 * lookups (`__sl_get_lite_body`) unroll 64 steps in each call, carrying
 * the current node's reference from step to step (a verification
 * workload: crates/cli/tests/nf_nodes.rs runs both builds). */
#ifndef WALK_UNROLL
#define WALK_UNROLL 1
#endif

/* Steps from the node in tmp 1: right while the next key is below the
 * search key, else note the node for this level (tmp level + 2) and go
 * down; at level 0 the next node is the first >= key (NEXT_TMP). The
 * node reached is left in tmp 1 for the next call. */
static long walk_step(__u64 i, void *ctx)
{
	struct walk *w = ctx;
	if (w->level < 0)
		return 1;
	__s32 level = w->level;
	ptr_node *cur = ptr_container_get_tmp(w->sl, 1);
	if (!cur) {
		w->level = -2;
		return 1;
	}
#pragma unroll
	for (int s = 0; s < WALK_UNROLL; s++) {
		__u32 l = level & (MAX_LEVEL - 1);
		ptr_node *nx = ptr_get_out(cur, l);
		if (nx && SN(nx)->key < w->key) {
			ptr_release_node(cur);
			cur = nx;
			continue;
		}
		ptr_container_set_tmp(w->sl, cur, l + 2);
		if (l == 0) {
			w->has_next = nx != 0;
			if (nx) {
				ptr_container_set_tmp(w->sl, nx, NEXT_TMP);
				ptr_release_node(nx);
			}
			ptr_release_node(cur);
			w->level = -1;
			return 1;
		}
		if (nx)
			ptr_release_node(nx);
		level = l - 1;
	}
	ptr_container_set_tmp(w->sl, cur, 1);
	ptr_release_node(cur);
	w->level = level;
	return 0;
}

static __always_inline __u32 height_of(__u64 key)
{
	__u64 h = key * 0x9e3779b97f4a7c15ULL;
	h ^= h >> 29;
	/* 1 + trailing zeros: level l with probability 2^-l, capped. */
	return 1 + bpf_tzcnt_u32((__u32)(h >> 16) | (1U << (MAX_LEVEL - 1)));
}

/* Insert a new key after the search noted each level's last node. */
static __always_inline int sl_insert(struct store *st, struct ptr_node_container *sl,
				     __u64 key, __u64 value)
{
	ptr_node *n = ptr_alloc_node();
	if (!n)
		return ST_FULL;
	int height = height_of(key);
	ptr_write_data1(n, __builtin_offsetof(struct skip_node, height), &height, sizeof(height));
	ptr_write_data1(n, __builtin_offsetof(struct skip_node, key), &key, sizeof(key));
	ptr_write_data2(n, __builtin_offsetof(struct skip_node, value), &value, sizeof(value));
	ptr_set_owner(sl, n);
	for (__u32 l = 0; l < MAX_LEVEL; l++) {
		if (l >= height)
			break;
		/* Above the list's level the search noted nothing: the head. */
		ptr_node *pre = ptr_container_get_tmp(sl, l < st->level ? l + 2 : 0);
		if (!pre)
			break;
		ptr_node *after = ptr_get_out(pre, l);
		if (after) {
			ptr_unconnect(pre, l, after, l);
			ptr_connect(n, l, after, l);
			ptr_release_node(after);
		}
		ptr_connect(pre, l, n, l);
		ptr_release_node(pre);
	}
	ptr_release_node(n);
	if (height > st->level)
		st->level = height;
	st->count++;
	return ST_OK;
}

/* Unlink `found` (key `key`) from every level it is on, then free it. */
static __always_inline int sl_delete(struct store *st, struct ptr_node_container *sl,
				     ptr_node *found, __u64 key)
{
	for (__u32 l = 0; l < MAX_LEVEL; l++) {
		if (l >= st->level)
			break;
		ptr_node *pre = ptr_container_get_tmp(sl, l + 2);
		if (!pre)
			continue;
		ptr_node *nx = ptr_get_out(pre, l);
		if (nx) {
			if (SN(nx)->key == key) {
				ptr_node *after = ptr_get_out(nx, l);
				ptr_unconnect(pre, l, nx, l);
				if (after) {
					ptr_unconnect(nx, l, after, l);
					ptr_connect(pre, l, after, l);
					ptr_release_node(after);
				}
			}
			ptr_release_node(nx);
		}
		ptr_release_node(pre);
	}
	ptr_unset_owner(found);
	st->count--;
	return ST_OK;
}

#ifdef PREFILL
/* Benchmark builds (-DPREFILL=N): an empty store is first filled with the
 * keys 0, 2, ..., 2(N-1) (value = key / 2), appended in order: tmp l + 2
 * holds level l's last node (the head at first). */
struct fill {
	struct ptr_node_container *sl;
	struct store *st;
};

static long fill_step(__u64 i, void *ctx)
{
	struct fill *f = ctx;
	ptr_node *n = ptr_alloc_node();
	if (!n)
		return 1;
	__u64 key = 2 * i, value = i;
	int height = height_of(key);
	ptr_write_data1(n, __builtin_offsetof(struct skip_node, height), &height, sizeof(height));
	ptr_write_data1(n, __builtin_offsetof(struct skip_node, key), &key, sizeof(key));
	ptr_write_data2(n, __builtin_offsetof(struct skip_node, value), &value, sizeof(value));
	ptr_set_owner(f->sl, n);
	for (__u32 l = 0; l < MAX_LEVEL; l++) {
		if (l >= height)
			break;
		ptr_node *last = ptr_container_get_tmp(f->sl, l + 2);
		if (!last)
			break;
		ptr_connect(last, l, n, l);
		ptr_container_set_tmp(f->sl, n, l + 2);
		ptr_release_node(last);
	}
	ptr_release_node(n);
	if (height > f->st->level)
		f->st->level = height;
	f->st->count++;
	return 0;
}

static __always_inline void prefill(struct store *st, struct ptr_node_container *sl,
				    ptr_node *head)
{
	if (st->count)
		return;
	for (__u32 l = 0; l < MAX_LEVEL; l++)
		ptr_container_set_tmp(sl, head, l + 2);
	struct fill f = { .sl = sl, .st = st };
	bpf_loop(PREFILL, fill_step, &f, 0);
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

	__u32 zero = 0;
	struct store *st = bpf_map_lookup_elem(&store, &zero);
	if (!st)
		return XDP_ABORTED;
	struct ptr_node_container *sl = bpf_kptr_xchg(&st->sl, NULL);
	if (!sl) {
		sl = ptr_create_node_container(MAX_LEVEL + 2);
		if (!sl)
			return XDP_ABORTED;
		st->count = 0;
		st->level = 1;
	}
	ptr_node *head = ptr_container_get_tmp(sl, 0);
	if (!head) {
		head = ptr_alloc_node();
		if (!head) {
			ptr_destory_node_container(sl);
			return XDP_ABORTED;
		}
		int max_height = MAX_LEVEL;
		ptr_write_data1(head, __builtin_offsetof(struct skip_node, height), &max_height,
				sizeof(max_height));
		ptr_set_owner(sl, head);
		ptr_container_set_tmp(sl, head, 0);
	}
#ifdef PREFILL
	prefill(st, sl, head);
#endif
	__u32 top = st->level;
	if (top < 1 || top > MAX_LEVEL)
		top = 1;	/* the map was written by someone else */
	ptr_container_set_tmp(sl, head, 1);
	ptr_release_node(head);

	__u64 key = m->key;
	struct walk w = { .sl = sl, .key = key, .level = top - 1 };
	bpf_loop(NODES + 2 * MAX_LEVEL, walk_step, &w, 0);
	int status = ST_MISS;
	if (w.level != -1)
		goto out;	/* not enough steps, or a lost node: cannot happen */

	ptr_node *next = w.has_next ? ptr_container_get_tmp(sl, NEXT_TMP) : 0;
	__u64 next_key = ~0ULL, next_value = 0;
	if (next) {
		next_key = SN(next)->key;
		next_value = SN(next)->value;
	}
	int found = next && next_key == key;

	switch (m->op) {
	case OP_PUT:
		if (found) {
			ptr_write_data2(next, __builtin_offsetof(struct skip_node, value), &m->value,
					sizeof(m->value));
			status = ST_OK;
		} else if (st->count >= NODES) {
			status = ST_FULL;
		} else {
			status = sl_insert(st, sl, key, m->value);
		}
		break;
	case OP_GET:
		if (found) {
			status = ST_OK;
			m->value = next_value;
		}
		break;
	case OP_DEL:
		if (found)
			status = sl_delete(st, sl, next, key);
		break;
	case OP_SUCC:
		if (next) {
			status = ST_OK;
			m->key = next_key;
			m->value = next_value;
		}
		break;
	}
	if (next)
		ptr_release_node(next);
out:;
	struct ptr_node_container *old = bpf_kptr_xchg(&st->sl, sl);
	if (old)
		ptr_destory_node_container(old);
	m->status = status;

	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
