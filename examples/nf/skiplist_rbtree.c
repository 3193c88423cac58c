/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The key-value store of skiplist.c (same requests, same replies) written
 * with the kernel's own graph kfuncs: a red-black tree of objects from
 * bpf_obj_new, added with bpf_rbtree_add and searched from bpf_rbtree_root
 * with bpf_rbtree_left/right (kernel 6.16 and later), all under a
 * bpf_spin_lock, as the kernel verifier's ownership rules demand. It runs
 * in the kernel and in bpfjet (interpreter and JIT): it is the kernel's
 * comparison point for the skip list (docs/PERFORMANCE.md).
 *
 * Differences the kernel's rules impose: a PUT allocates its node before
 * taking the lock (bpf_obj_new may not be called under it) and drops it
 * again when the key exists or the store is full; the tree is global (one
 * lock for all CPUs), where the skip list is one store per map entry.
 */
#include "nf.h"
#include <bpf/bpf_core_read.h>

#ifndef NODES
#define NODES 4096
#endif
#define MAX_DEPTH 64	/* an rbtree of n nodes is at most 2 log2(n + 1) deep */
#define SL_PORT 9000

enum { OP_PUT = 1, OP_GET = 2, OP_DEL = 3, OP_SUCC = 4 };
enum { ST_MISS = 0, ST_OK = 1, ST_FULL = 2 };

/* The uapi header of the build machine (libbpf-dev's) predates these; the
 * kernel knows them by name and size. */
struct bpf_rb_root {
	__u64 :64;
	__u64 :64;
} __attribute__((aligned(8)));
struct bpf_rb_node {
	__u64 :64;
	__u64 :64;
	__u64 :64;
	__u64 :64;
} __attribute__((aligned(8)));

struct kv_msg {
	__u8 op;
	__u8 status;
	__u16 pad;
	__u32 pad2;
	__u64 key;
	__u64 value;
} __attribute__((packed));

struct kv_node {
	__u64 key;
	__u64 value;
	struct bpf_rb_node rb;
};

extern void *bpf_obj_new_impl(__u64 local_type_id__k, void *meta__ign) __ksym;
extern void bpf_obj_drop_impl(void *p__alloc, void *meta__ign) __ksym;
extern int bpf_rbtree_add_impl(struct bpf_rb_root *root, struct bpf_rb_node *node,
			       _Bool (less)(struct bpf_rb_node *a, const struct bpf_rb_node *b),
			       void *meta__ign, __u64 off) __ksym;
extern struct bpf_rb_node *bpf_rbtree_remove(struct bpf_rb_root *root,
					     struct bpf_rb_node *node) __ksym;
extern struct bpf_rb_node *bpf_rbtree_root(struct bpf_rb_root *root) __ksym;
extern struct bpf_rb_node *bpf_rbtree_left(struct bpf_rb_root *root,
					   struct bpf_rb_node *node) __ksym;
extern struct bpf_rb_node *bpf_rbtree_right(struct bpf_rb_root *root,
					    struct bpf_rb_node *node) __ksym;

#define __contains(name, node) __attribute__((btf_decl_tag("contains:" #name ":" #node)))
#define private(name) SEC(".data." #name) __attribute__((visibility("hidden"), aligned(8)))

private(A) struct bpf_spin_lock glock;
private(A) struct bpf_rb_root groot __contains(kv_node, rb);
private(A) __u64 count;

static _Bool less(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return container_of(a, struct kv_node, rb)->key < container_of(b, struct kv_node, rb)->key;
}

static __always_inline struct kv_node *new_node(__u64 key, __u64 value)
{
	struct kv_node *n = bpf_obj_new_impl(bpf_core_type_id_local(struct kv_node), 0);
	if (n) {
		n->key = key;
		n->value = value;
	}
	return n;
}

#ifdef PREFILL
/* Benchmark builds: keys 0, 2, ..., 2(N-1), value = key / 2, as skiplist.c. */
static long fill_step(__u64 i, void *ctx)
{
	struct kv_node *n = new_node(2 * i, i);
	if (!n)
		return 1;
	bpf_spin_lock(&glock);
	bpf_rbtree_add_impl(&groot, &n->rb, less, 0, 0);
	count++;
	bpf_spin_unlock(&glock);
	return 0;
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
#ifdef PREFILL
	if (!count)
		bpf_loop(PREFILL, fill_step, 0, 0);
#endif

	__u8 op = m->op;
	__u64 key = m->key, value = m->value;
	struct kv_node *fresh = 0;
	if (op == OP_PUT) {
		fresh = new_node(key, value);
		if (!fresh)
			return XDP_ABORTED;
	}

	int status = ST_MISS, succ = 0;
	__u64 succ_key = 0, succ_value = 0;
	struct bpf_rb_node *removed = 0;
	bpf_spin_lock(&glock);
	struct bpf_rb_node *n = bpf_rbtree_root(&groot), *hit = 0;
	for (int i = 0; i < MAX_DEPTH && n; i++) {
		struct kv_node *d = container_of(n, struct kv_node, rb);
		__u64 k = d->key;
		if (key <= k) {
			succ = 1;
			succ_key = k;
			succ_value = d->value;
		}
		if (k == key) {
			hit = n;
			break;
		}
		n = key < k ? bpf_rbtree_left(&groot, n) : bpf_rbtree_right(&groot, n);
	}
	switch (op) {
	case OP_PUT:
		if (hit) {
			container_of(hit, struct kv_node, rb)->value = value;
			status = ST_OK;
		} else if (count >= NODES) {
			status = ST_FULL;
		} else if (fresh) {	/* always, for a PUT: said for the verifier */
			bpf_rbtree_add_impl(&groot, &fresh->rb, less, 0, 0);
			fresh = 0;
			count++;
			status = ST_OK;
		}
		break;
	case OP_GET:
		if (hit) {
			status = ST_OK;
			value = succ_value;
		}
		break;
	case OP_DEL:
		if (hit) {
			removed = bpf_rbtree_remove(&groot, hit);
			count--;
			status = ST_OK;
		}
		break;
	case OP_SUCC:
		if (succ) {
			status = ST_OK;
			key = succ_key;
			value = succ_value;
		}
		break;
	}
	bpf_spin_unlock(&glock);
	if (fresh)
		bpf_obj_drop_impl(fresh, 0);
	if (removed)
		bpf_obj_drop_impl(container_of(removed, struct kv_node, rb), 0);

	m->status = status;
	m->key = key;
	m->value = value;
	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
