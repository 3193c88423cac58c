/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Tail calls and helpers the JIT calls natively for programs of a JitObject
 * (crates/jit/tests/native_calls.rs runs each program on the interpreter and
 * the JIT and compares action, packet and maps).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* trail[0]: programs entered, trail[1]: tail calls that fell through,
 * trail[2]: the last value a program recorded. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} trail SEC(".maps");

int chain(struct xdp_md *ctx);
int leaf(struct xdp_md *ctx);

/* Slot 0: the chain (calls itself until the limit), slot 2: the leaf, slot
 * 1 empty; the test rewrites slots at run time. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
	__array(values, int(void *));
} jmp SEC(".maps") = {
	.values = { [0] = (void *)&chain, [2] = (void *)&leaf },
};

static __always_inline void bump(__u32 k, __u64 v, int add)
{
	__u64 *p = bpf_map_lookup_elem(&trail, &k);
	if (p) {
		if (add)
			*p += v;
		else
			*p = v;
	}
}

static __always_inline int tail(struct xdp_md *ctx, __u32 slot)
{
	bpf_tail_call(ctx, &jmp, slot);
	bump(1, 1, 1);
	return 0;
}

/* Enters itself through slot 0 until the 33-tail-call limit stops it. */
SEC("xdp")
int chain(struct xdp_md *ctx)
{
	bump(0, 1, 1);
	tail(ctx, 0);
	return XDP_TX;
}

SEC("xdp")
int leaf(struct xdp_md *ctx)
{
	bump(0, 1, 1);
	bump(2, ctx->data_end - ctx->data, 0);
	return XDP_DROP;
}

/* Slot chosen by the packet's first byte: 0 chain, 1 empty, 2 leaf, 3
 * whatever the test put there, larger ones out of range. */
SEC("xdp")
int dispatch(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + 1 > end)
		return XDP_ABORTED;
	__u8 slot = *(__u8 *)data;
	bump(0, 1, 1);
	tail(ctx, slot);
	return XDP_PASS;
}

/* A tail call from a subprogram replaces the subprogram only. */
static __noinline int sub_tail(struct xdp_md *ctx)
{
	bump(0, 100, 1);
	bpf_tail_call(ctx, &jmp, 2);
	/* Not a constant: clang would otherwise fold it into the caller. */
	return ctx->data_end - ctx->data;
}

SEC("xdp")
int from_subprog(struct xdp_md *ctx)
{
	int r = sub_tail(ctx);
	bump(2, (__u64)r + 1000, 0);
	return XDP_PASS;
}

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} devs SEC(".maps");

/* bpf_redirect_map(devs, byte 1, byte 2 | byte 3 << 8): hits, misses
 * with the flags' fallback action, broadcast, bad flags. */
SEC("xdp")
int redirect_dev(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + 4 > end)
		return XDP_ABORTED;
	__u8 *b = data;
	__u64 flags = b[2] | ((__u64)b[3] << 8);
	long r = bpf_redirect_map(&devs, b[1], flags);
	bump(2, (__u64)r, 0);
	return r;
}

/* bpf_redirect(ifindex, byte 2): XDP takes no flags. */
SEC("xdp")
int redirect_plain(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + 4 > end)
		return XDP_ABORTED;
	__u8 *b = data;
	long r = bpf_redirect(b[1], b[2]);
	bump(2, (__u64)r, 0);
	return r;
}

struct inner_hash {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} inner0 SEC(".maps"), inner1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct inner_hash);
} outer SEC(".maps") = {
	.values = { [0] = &inner0, [1] = &inner1 },
};

/* The inner map named by byte 0 (katran's per-CPU table): byte 1 is the
 * key; a hit counts up, a miss inserts, byte 2 == 1 deletes instead. The
 * inner map's handle is not a compile-time constant. */
SEC("xdp")
int inner_maps(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + 4 > end)
		return XDP_ABORTED;
	__u8 *b = data;
	__u32 slot = b[0];
	void *inner = bpf_map_lookup_elem(&outer, &slot);
	if (!inner)
		return XDP_DROP;
	__u32 key = b[1];
	if (b[2] == 1) {
		long r = bpf_map_delete_elem(inner, &key);
		bump(2, (__u64)r, 0);
		return XDP_TX;
	}
	__u64 *v = bpf_map_lookup_elem(inner, &key);
	if (v) {
		*v += 1;
		bump(2, *v, 0);
		return XDP_PASS;
	}
	__u64 one = 1;
	long r = bpf_map_update_elem(inner, &key, &one, BPF_NOEXIST);
	bump(2, (__u64)r + 500, 0);
	return XDP_PASS;
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} rb SEC(".maps");

/* Byte 0 picks: 0 reserve + submit, 1 reserve + discard, 2 output, 3 a
 * reservation too large for the ring. trail[2] gets the helper's result
 * and the bytes the consumer may read (bpf_ringbuf_query stays on the
 * trampoline: it observes what the direct calls did). */
SEC("xdp")
int ring(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + 4 > end)
		return XDP_ABORTED;
	__u8 *b = data;
	long r = 0;
	if (b[0] == 0 || b[0] == 1) {
		__u64 *s = bpf_ringbuf_reserve(&rb, 16, 0);
		if (!s)
			return XDP_DROP;
		s[0] = b[1];
		s[1] = b[2];
		if (b[0] == 0)
			bpf_ringbuf_submit(s, 0);
		else
			bpf_ringbuf_discard(s, 0);
	} else if (b[0] == 2) {
		__u64 v = b[1];
		r = bpf_ringbuf_output(&rb, &v, sizeof(v), 0);
	} else {
		void *s = bpf_ringbuf_reserve(&rb, 8192, 0);
		if (s) {
			bpf_ringbuf_discard(s, 0);
			return XDP_TX;
		}
	}
	__u64 avail = bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA);
	bump(2, ((__u64)r << 32) | avail, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
