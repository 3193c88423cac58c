/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bpfjet's NF library kfuncs (crates/kfuncs, documented in docs/SUPPORT.md).
 * Include after <linux/bpf.h> / <bpf/bpf_helpers.h> in a program built with
 * clang -target bpf. bpfjet verifies, interprets and JIT-compiles calls to
 * them; the kernel does not provide them.
 *
 * Memory arguments are followed by their size in bytes (`p, p__sz`), which
 * the verifier checks against the memory the pointer may access.
 */
#ifndef BPFJET_KFUNCS_H
#define BPFJET_KFUNCS_H

#include <linux/types.h>

#ifndef __ksym
#define __ksym __attribute__((section(".ksyms")))
#endif

struct bpfjet_key16 { __u8 bytes[16]; };
struct bpfjet_key32 { __u8 bytes[32]; };

/* Bit scans: ffs is 1-based (0 for 0), ctz/clz return the width for 0. */
extern __u64 bpfjet_ffs32(__u32 x) __ksym;
extern __u64 bpfjet_ffs64(__u64 x) __ksym;
extern __u64 bpfjet_ctz32(__u32 x) __ksym;
extern __u64 bpfjet_ctz64(__u64 x) __ksym;
extern __u64 bpfjet_clz32(__u32 x) __ksym;
extern __u64 bpfjet_clz64(__u64 x) __ksym;
extern __u64 bpfjet_popcount32(__u32 x) __ksym;
extern __u64 bpfjet_popcount64(__u64 x) __ksym;

/* Bucket search over bucket__sz / sizeof(element) elements: index of the
 * first element equal to key (the element count if none); mask of equal
 * elements (bit i for element i < 64). */
extern __u64 bpfjet_find_u16(const void *bucket, __u32 bucket__sz, __u16 key) __ksym;
extern __u64 bpfjet_find_u32(const void *bucket, __u32 bucket__sz, __u32 key) __ksym;
extern __u64 bpfjet_find_u64(const void *bucket, __u32 bucket__sz, __u64 key) __ksym;
extern __u64 bpfjet_mask_u16(const void *bucket, __u32 bucket__sz, __u16 key) __ksym;
extern __u64 bpfjet_mask_u32(const void *bucket, __u32 bucket__sz, __u32 key) __ksym;
extern __u64 bpfjet_mask_u64(const void *bucket, __u32 bucket__sz, __u64 key) __ksym;

/* Minimum / maximum value (type max / 0 when empty) and the index of its
 * first occurrence. */
extern __u64 bpfjet_min_u16(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_min_u32(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_min_u64(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_max_u16(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_max_u32(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_max_u64(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_argmin_u16(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_argmin_u32(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_argmin_u64(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_argmax_u16(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_argmax_u32(const void *bucket, __u32 bucket__sz) __ksym;
extern __u64 bpfjet_argmax_u64(const void *bucket, __u32 bucket__sz) __ksym;

/* 1 when the keys are equal, else 0. */
extern __u64 bpfjet_key16_eq(const struct bpfjet_key16 *a, const struct bpfjet_key16 *b) __ksym;
extern __u64 bpfjet_key32_eq(const struct bpfjet_key32 *a, const struct bpfjet_key32 *b) __ksym;

/* CRC32C (Castagnoli, the SSE4.2 crc32 instruction) register after feeding
 * data from seed: no pre- or post-inversion. */
extern __u64 bpfjet_crc32c(const void *data, __u32 data__sz, __u32 seed) __ksym;

/* k (1..8) CRC32C hashes of key with seeds BPFJET_SEEDS[0..k), fused with
 * their use. Count-min: rows = k rows of rows__sz / 4 / k u32 counters, row
 * i's column is hash_i % width; cm_inc increments and returns the new
 * minimum, cm_min returns the minimum. Bloom: bit hash_i % (8 * bits__sz)
 * (bit j%8 of byte j/8); bloom_set returns 1 if all bits were already set.
 * Bad k or a table too small: -EINVAL. */
#define BPFJET_SEEDS {0x84222325, 0xcbf29ce4, 0x9e3779b9, 0x7f4a7c15, \
		      0x85ebca6b, 0xc2b2ae35, 0x27d4eb2f, 0x165667b1}
extern __u64 bpfjet_cm_inc(const void *key, __u32 key__sz, void *rows, __u32 rows__sz, __u32 k) __ksym;
extern __u64 bpfjet_cm_min(const void *key, __u32 key__sz, const void *rows, __u32 rows__sz, __u32 k) __ksym;
extern __u64 bpfjet_bloom_set(const void *key, __u32 key__sz, void *bits, __u32 bits__sz, __u32 k) __ksym;
extern __u64 bpfjet_bloom_test(const void *key, __u32 key__sz, const void *bits, __u32 bits__sz, __u32 k) __ksym;

/* Random pool: geometric sampling for probabilistic updates (NitroSketch).
 * Keep the pool in a map value (a per-CPU array: one per CPU slot) and
 * start it with bpfjet_geo_init(pool, scale, seed): scale is -log2(1 - p)
 * in Q16 for sampling probability p (BPFJET_GEO_SCALE_1_IN(n) for p = 1/n,
 * 0xffffffff for p = 1), seed 0 seeds from the OS, any other value makes the
 * run reproducible; -EINVAL for scale 0. bpfjet_geo_should_do returns 1 for
 * a sampled event, 0 for a skipped one (0 always before init); the JIT
 * compiles the skip path and the draw of a pre-generated count in. bpfjet_geo_next returns the next geometric
 * count itself (events to skip), for programs keeping their own countdown.
 * Counts are pre-generated 64 at a time: count i is floor(L(u_i) / scale),
 * u_i the i-th xorshift32 (13/17/5) draw from seed, L(u) = -log2(u / 2^32)
 * in Q16 with an 8-bit mantissa table (crates/kfuncs/src/random.rs). */
#define BPFJET_GEO_POOL 64
struct bpfjet_geo_pool {
	__u32 countdown;	/* events still to skip */
	__u32 next;		/* next unused entry of counts */
	__u32 scale;		/* 0 until bpfjet_geo_init */
	__u32 state;		/* xorshift32 state */
	__u32 counts[BPFJET_GEO_POOL];
};
#define BPFJET_GEO_SCALE_1_IN_2 65536
#define BPFJET_GEO_SCALE_1_IN_4 27200
#define BPFJET_GEO_SCALE_1_IN_8 12625
#define BPFJET_GEO_SCALE_1_IN_16 6102
#define BPFJET_GEO_SCALE_1_IN_32 3002
#define BPFJET_GEO_SCALE_1_IN_64 1489
#define BPFJET_GEO_SCALE_1_IN_128 742
#define BPFJET_GEO_SCALE_1_IN(n) BPFJET_GEO_SCALE_1_IN_##n
extern __u64 bpfjet_geo_init(struct bpfjet_geo_pool *pool, __u32 scale, __u32 seed) __ksym;
extern __u64 bpfjet_geo_should_do(struct bpfjet_geo_pool *pool) __ksym;
extern __u64 bpfjet_geo_next(struct bpfjet_geo_pool *pool) __ksym;

/* List-buckets: nbuckets FIFO queues of elem_size-byte elements (1..256) in
 * memory the program passes with its size — a map value; a per-CPU array
 * gives one per CPU slot, lock-free. Layout (all __u32): header {nbuckets,
 * elem_size, capacity, free}, per bucket {head, tail, len}, then capacity
 * nodes {next, element padded to 4}; links are node index + 1, 0 for none.
 * bpfjet_bktlist_init lays it out and returns the capacity (-EINVAL when not
 * one node fits); push appends (-ENOSPC when the nodes are used up), pop
 * moves the front element out, peek copies it (-ENOENT when empty), len
 * counts a bucket; -EINVAL for a bucket out of range, an element size other
 * than elem_size, or memory init did not lay out (checked on every call:
 * a corrupted structure is refused, never followed out of bounds). */
extern __s64 bpfjet_bktlist_init(void *lists, __u32 lists__sz, __u32 nbuckets, __u32 elem_size) __ksym;
extern __s64 bpfjet_bktlist_push(void *lists, __u32 lists__sz, __u32 bucket, const void *elem, __u32 elem__sz) __ksym;
extern __s64 bpfjet_bktlist_pop(void *lists, __u32 lists__sz, __u32 bucket, void *out, __u32 out__sz) __ksym;
extern __s64 bpfjet_bktlist_peek(const void *lists, __u32 lists__sz, __u32 bucket, void *out, __u32 out__sz) __ksym;
extern __s64 bpfjet_bktlist_len(const void *lists, __u32 lists__sz, __u32 bucket) __ksym;
/* Bytes of list-buckets for nbuckets queues of n elements of size bytes. */
#define BPFJET_BKTLIST_BYTES(nbuckets, n, size) \
	(16 + 12 * (nbuckets) + (n) * (4 + (((size) + 3) / 4) * 4))

/* Node memory: nodes of data_size bytes (1..4096) with nlinks (0..64)
 * numbered links each, allocated from a pool in memory the program passes
 * with its size — a map value; a per-CPU array gives one pool per CPU slot,
 * lock-free — for skip lists, linked lists and trees. A node is named by a
 * handle (__u64, 0 = null) that carries a generation: after
 * bpfjet_node_free, every handle to the node (in a map, in another node's
 * link) is stale — links to it read as null, calls on it return -EINVAL.
 * bpfjet_node_pool_init lays the pool out and returns its capacity; a pool
 * already laid out with the same geometry is kept (call it on every packet).
 * bpfjet_node_alloc returns a new node (links null, data zeroed) or 0 when
 * the pool is exhausted; connect points link `link` of `from` at `to`,
 * disconnect clears it, next follows it (0 when null or stale). Node data is
 * reached with bpfjet_node_data(pool, pool__sz, node, size): size is a
 * constant, at most the pool's data_size (else NULL, as for a stale node);
 * the pointer is a reference the verifier tracks: give it back with
 * bpfjet_node_put on every path and do not use it after (both checked at
 * load time). Layout: crates/kfuncs/src/nodes.rs; every index read from the
 * pool or a handle is checked, a corrupted pool is refused, never followed
 * out of bounds. */
extern __s64 bpfjet_node_pool_init(void *pool, __u32 pool__sz, __u32 data_size, __u32 nlinks) __ksym;
extern __u64 bpfjet_node_alloc(void *pool, __u32 pool__sz) __ksym;
extern __s64 bpfjet_node_free(void *pool, __u32 pool__sz, __u64 node) __ksym;
extern __s64 bpfjet_node_connect(void *pool, __u32 pool__sz, __u64 from, __u32 link, __u64 to) __ksym;
extern __s64 bpfjet_node_disconnect(void *pool, __u32 pool__sz, __u64 from, __u32 link) __ksym;
extern __u64 bpfjet_node_next(void *pool, __u32 pool__sz, __u64 node, __u32 link) __ksym;
extern void *bpfjet_node_data(void *pool, __u32 pool__sz, __u64 node, __u32 data__szk) __ksym;
extern void bpfjet_node_put(void *data) __ksym;
/* Bytes of a pool of n nodes of data_size bytes with nlinks links. */
#define BPFJET_NODE_POOL_BYTES(n, data_size, nlinks) \
	(32 + (n) * (8 + 8 * (nlinks) + (((data_size) + 7) / 8) * 8))

#endif
