/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * One XDP program per helper the JIT compiles in (crates/jit/tests/inlining.rs
 * runs each on the interpreter and the JIT and compares action, packet and
 * maps). Every program folds what the helper returned into the packet, so a
 * wrong value shows in data_out.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} arr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} pcpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} h4 SEC(".maps");

struct key12 {
	__u32 a, b, c;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct key12);
	__type(value, __u64);
} h12 SEC(".maps");

struct key6 {
	__u8 b[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16);
	__type(key, struct key6);
	__type(value, __u64);
} lru6 SEC(".maps");

const volatile __u32 rodata_word = 0x11223344;
const char rodata_name[8] = "bpfjet";

static __always_inline int put(struct xdp_md *ctx, int off, __u64 v)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	if (data + 64 > end)
		return XDP_ABORTED;
	if (off < 0 || off > 56)
		return XDP_ABORTED;
	__builtin_memcpy(data + off, &v, 8);
	return XDP_TX;
}

static __always_inline __u32 pkt_byte(struct xdp_md *ctx, int i)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	if (data + 64 > end)
		return 0;
	return data[i & 63];
}

SEC("xdp")
int array_var_key(struct xdp_md *ctx)
{
	__u64 sum = 0;
	/* Keys 0..11: the last four are out of range (NULL). */
	for (__u32 i = 0; i < 12; i++) {
		__u32 k = (i + pkt_byte(ctx, 20)) % 12;
		__u64 *v = bpf_map_lookup_elem(&arr, &k);
		if (v) {
			*v += k + 1;
			sum += *v;
		} else {
			sum += 1000;
		}
	}
	return put(ctx, 16, sum);
}

SEC("xdp")
int array_const_key(struct xdp_md *ctx)
{
	__u32 k = 3;
	__u64 *v = bpf_map_lookup_elem(&arr, &k);
	if (!v)
		return XDP_ABORTED;
	*v += 7;
	return put(ctx, 16, *v);
}

SEC("xdp")
int percpu_array(struct xdp_md *ctx)
{
	__u32 k = pkt_byte(ctx, 21) & 3;
	__u64 *v = bpf_map_lookup_elem(&pcpu, &k);
	if (!v)
		return XDP_ABORTED;
	*v += 1;
	return put(ctx, 16, *v + ((__u64)bpf_get_smp_processor_id() << 32));
}

/* Per-CPU keys 0..7 of a 4-entry map: half the lookups are out of range
 * and must give NULL although the in-range addresses are known non-null
 * (crates/jit/tests/inlining.rs percpu_array_out_of_range_keys). */
SEC("xdp")
int percpu_out_of_range(struct xdp_md *ctx)
{
	__u64 sum = 0;
	for (__u32 i = 0; i < 8; i++) {
		__u32 k = (i + pkt_byte(ctx, 22)) & 7;
		__u64 *v = bpf_map_lookup_elem(&pcpu, &k);
		if (v) {
			*v += k + 1;
			sum += *v;
		} else {
			sum += 1000 << i;
		}
	}
	return put(ctx, 16, sum);
}

SEC("xdp")
int hash_k4(struct xdp_md *ctx)
{
	__u64 sum = 0;
	for (__u32 i = 0; i < 6; i++) {
		__u32 k = i * 3;
		__u64 *v = bpf_map_lookup_elem(&h4, &k);
		sum = sum * 31 + (v ? *v : 99);
		if (v)
			*v += 1;
	}
	return put(ctx, 16, sum);
}

SEC("xdp")
int hash_k12(struct xdp_md *ctx)
{
	struct key12 k = { .a = 1, .b = pkt_byte(ctx, 22), .c = 3 };
	__u64 *v = bpf_map_lookup_elem(&h12, &k);
	if (!v) {
		__u64 init = 5;
		bpf_map_update_elem(&h12, &k, &init, BPF_ANY);
		v = bpf_map_lookup_elem(&h12, &k);
		if (!v)
			return XDP_ABORTED;
	}
	return put(ctx, 16, *v);
}

SEC("xdp")
int lru_k6(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	struct key6 k;
	if (data + 64 > end)
		return XDP_ABORTED;
	__builtin_memcpy(k.b, data, 6);
	__u64 *v = bpf_map_lookup_elem(&lru6, &k);
	__u64 seen = v ? *v : 0;
	__u64 next = seen + 1;
	bpf_map_update_elem(&lru6, &k, &next, BPF_ANY);
	return put(ctx, 16, seen);
}

SEC("xdp")
int csum(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	if (data + 64 > end)
		return XDP_ABORTED;
	__s64 a = bpf_csum_diff(0, 0, (void *)(data + 14), 20, 0);
	__s64 b = bpf_csum_diff((void *)(data + 14), 8, (void *)(data + 30), 12, 0x1234);
	__s64 c = bpf_csum_diff((void *)(data + 14), 4, 0, 0, 0);
	return put(ctx, 16, (__u64)a ^ ((__u64)b << 16) ^ ((__u64)c << 40));
}

SEC("xdp")
int load_store_bytes(struct xdp_md *ctx)
{
	__u8 buf[16] = {};
	long r1 = bpf_xdp_load_bytes(ctx, 2, buf, 16);
	long r2 = bpf_xdp_load_bytes(ctx, 60, buf, 16);	/* past the end */
	long r3 = bpf_xdp_load_bytes(ctx, 0x10000, buf, 4); /* EFAULT */
	buf[0] ^= 0xff;
	long r4 = bpf_xdp_store_bytes(ctx, 40, buf, 16);
	long r5 = bpf_xdp_store_bytes(ctx, 63, buf, 2);
	return put(ctx, 0, (__u64)r1 + ((__u64)(r2 & 0xff) << 8) + ((__u64)(r3 & 0xff) << 16) +
			      ((__u64)r4 << 24) + ((__u64)(r5 & 0xff) << 32));
}

SEC("xdp")
int strings(struct xdp_md *ctx)
{
	char s[8] = "bpfjet";
	long same = bpf_strncmp(s, 7, rodata_name);
	s[3] = pkt_byte(ctx, 23);
	long diff = bpf_strncmp(s, 7, rodata_name);
	long shorter = bpf_strncmp(s, 2, rodata_name);
	return put(ctx, 16, (__u64)(same & 0xff) | ((__u64)(diff & 0xff) << 8) |
				    ((__u64)(shorter & 0xff) << 16));
}

SEC("xdp")
int rodata(struct xdp_md *ctx)
{
	return put(ctx, 16, (__u64)rodata_word * 3 + rodata_name[1]);
}

SEC("xdp")
int clock(struct xdp_md *ctx)
{
	__u64 a = bpf_ktime_get_ns();
	__u64 b = bpf_ktime_get_ns();
	__u64 boot = bpf_ktime_get_boot_ns();
	__u64 coarse = bpf_ktime_get_coarse_ns();
	__u64 tai = bpf_ktime_get_tai_ns();
	/* Deterministic: only whether the clocks are sane shows (boot time
	 * includes suspend, so it is never behind the monotonic clock). */
	return put(ctx, 16,
		   (a != 0) + ((b >= a) << 1) + ((boot >= a) << 2) + ((coarse != 0) << 3) +
			   ((tai > boot) << 4));
}

struct loop_ctx {
	struct xdp_md *xdp;
	__u64 acc;
	__u32 stop_at;
};

static long loop_body(__u32 i, struct loop_ctx *c)
{
	__u32 k = i & 7;
	__u64 *v = bpf_map_lookup_elem(&arr, &k);
	if (v)
		c->acc = c->acc * 17 + *v + i;
	return i == c->stop_at;
}

SEC("xdp")
int loop(struct xdp_md *ctx)
{
	struct loop_ctx c = { .xdp = ctx, .acc = 1, .stop_at = pkt_byte(ctx, 24) % 40 };
	long n1 = bpf_loop(50, loop_body, &c, 0);	/* stops early */
	c.stop_at = 1000;
	long n2 = bpf_loop(20, loop_body, &c, 0);	/* runs out */
	long n3 = bpf_loop(0, loop_body, &c, 0);
	long n4 = bpf_loop(5, loop_body, &c, 1);	/* bad flags */
	return put(ctx, 8, c.acc) == XDP_TX
		       ? put(ctx, 16, n1 + (n2 << 8) + (n3 << 16) + ((__u64)(n4 & 0xff) << 24))
		       : XDP_ABORTED;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Two maps' values: the array value is read, a per-CPU value written, the
 * array value read again (clang reloads it: to it, both are pointers a
 * call returned); then a second per-CPU lookup. The JIT addresses each
 * value through its map's symbol and loads the CPU slot once, so LLVM
 * keeps the first read and forwards it, and the two lookups share the CPU
 * load. */
SEC("xdp")
int two_maps(struct xdp_md *ctx)
{
	__u32 k = pkt_byte(ctx, 20) & 7;
	__u32 j = pkt_byte(ctx, 21) & 3;
	__u64 *a = bpf_map_lookup_elem(&arr, &k);
	__u64 *p = bpf_map_lookup_elem(&pcpu, &j);
	if (!a || !p)
		return XDP_ABORTED;
	*p += *a;
	__u32 j2 = j ^ 1;
	__u64 *q = bpf_map_lookup_elem(&pcpu, &j2);
	if (!q)
		return XDP_ABORTED;
	*q += *a * 3;
	return put(ctx, 16, *a + *p + *q);
}
