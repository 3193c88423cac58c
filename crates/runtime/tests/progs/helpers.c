/* One program per helper family; inputs in cfg, results in out. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 2);
	__type(value, __u32);
} fifo SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} small SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} pcpu SEC(".maps");

struct locked {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct locked);
} locks SEC(".maps");

const char greeting[] = "hello";

SEC("xdp")
int csum(struct xdp_md *ctx)
{
	struct vals *c = get(&cfg), *r = get(&out);
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if (!c || !r)
		return XDP_ABORTED;
	if (data + 64 > end)
		return XDP_DROP;
	__u32 fsz = c->v[0] & 0x3c, tsz = c->v[1] & 0x3c;
	r->v[0] = bpf_csum_diff(data, fsz, data + 4, tsz, (__u32)c->v[2]);
	r->v[1] = bpf_csum_diff(data, 8, 0, 0, (__u32)c->v[2]);
	r->v[2] = bpf_csum_diff(0, 0, data + 2, 12, (__u32)c->v[2]);
	r->v[3] = bpf_csum_diff(data, 3, data, 4, 0);
	r->v[4] = bpf_csum_diff(data + 1, 20, data + 7, 16, (__u32)c->v[3]);
	r->v[6] = bpf_csum_diff(data, 5, 0, 0, (__u32)c->v[3]);
	r->v[7] = bpf_csum_diff(0, 0, data + 3, 7, (__u32)c->v[3]);
	if (data + 600 > end)
		return XDP_PASS;
	r->v[5] = bpf_csum_diff(data, 256, data + 256, 260, 0);
	r->v[8] = bpf_csum_diff(data, 256, data + 256, 256, 0);
	return XDP_PASS;
}

SEC("xdp")
int maps(struct xdp_md *ctx)
{
	struct vals *r = get(&out);
	__u32 k = 1, v32 = 7;
	__u64 v = 11, *p;

	if (!r)
		return XDP_ABORTED;
	r->v[0] = bpf_map_update_elem(&table, &k, &v, BPF_EXIST);
	r->v[1] = bpf_map_update_elem(&table, &k, &v, BPF_NOEXIST);
	r->v[2] = bpf_map_update_elem(&table, &k, &v, BPF_NOEXIST);
	r->v[3] = bpf_map_delete_elem(&table, &v32);
	__u32 keys[4] = { 2, 3, 4, 5 };
#pragma unroll
	for (int i = 0; i < 4; i++)
		r->v[4] += bpf_map_update_elem(&table, &keys[i], &v, BPF_ANY);
	r->v[5] = bpf_map_update_elem(&table, &k, &v, 77);
	k = 9;
	r->v[6] = bpf_map_update_elem(&small, &k, &v, BPF_ANY);
	r->v[7] = bpf_map_delete_elem(&small, &v32);
	r->v[8] = bpf_map_push_elem(&fifo, &v32, 0);
	v32 = 8;
	r->v[8] += 10 * bpf_map_push_elem(&fifo, &v32, 0);
	r->v[9] = bpf_map_push_elem(&fifo, &v32, 0);
	r->v[10] = bpf_map_pop_elem(&fifo, &v32);
	r->v[11] = v32;
	bpf_map_pop_elem(&fifo, &v32);
	v32 = 99;
	r->v[12] = bpf_map_peek_elem(&fifo, &v32);
	r->v[13] = v32;
	k = 0;
	p = bpf_map_lookup_elem(&pcpu, &k);
	if (p)
		*p += 1 + bpf_get_smp_processor_id();
	r->v[14] = bpf_get_numa_node_id();
	struct locked *l = bpf_map_lookup_elem(&locks, &k);
	if (l) {
		bpf_spin_lock(&l->lock);
		l->count++;
		bpf_spin_unlock(&l->lock);
	}
	return XDP_PASS;
}

struct loop_ctx {
	struct vals *r;
};

static long count_cb(__u32 i, void *ctx)
{
	struct vals *r = ((struct loop_ctx *)ctx)->r;
	r->v[1] += i;
	return i == r->v[15] ? 1 : 0;
}

static long elem_cb(void *map, __u32 *key, __u64 *val, void *ctx)
{
	struct vals *r = ((struct loop_ctx *)ctx)->r;
	r->v[4] += *val;
	r->v[5] += *key;
	*val += 1;
	return 0;
}

static long hash_cb(void *map, __u32 *key, __u64 *val, void *ctx)
{
	struct vals *r = ((struct loop_ctx *)ctx)->r;
	r->v[7] += *key;
	return 0;
}

/* Deletes the element it is given when its key is odd: the walk goes on
 * (the kernel's walks a bucket's chain without a lock). */
static long delete_cb(void *map, __u32 *key, __u64 *val, void *ctx)
{
	struct vals *r = ((struct loop_ctx *)ctx)->r;
	r->v[10] += 1;
	if (*key & 1)
		r->v[12] += bpf_map_delete_elem(map, key) == 0;
	return 0;
}

SEC("xdp")
int loops(struct xdp_md *ctx)
{
	struct vals *c = get(&cfg), *r = get(&out);
	if (!c || !r)
		return XDP_ABORTED;
	struct loop_ctx lc = { r };
	r->v[15] = c->v[0];
	r->v[0] = bpf_loop(c->v[1], count_cb, &lc, 0);
	r->v[2] = bpf_loop(3, count_cb, &lc, 1);
	r->v[3] = bpf_loop((1 << 23) + 1, count_cb, &lc, 0);
	r->v[6] = bpf_for_each_map_elem(&small, elem_cb, &lc, 0);
	r->v[8] = bpf_for_each_map_elem(&table, hash_cb, &lc, 0);
	r->v[9] = bpf_for_each_map_elem(&small, elem_cb, &lc, 1);
	r->v[10] = 0;
	r->v[12] = 0;
	r->v[11] = bpf_for_each_map_elem(&table, delete_cb, &lc, 0);
	return XDP_PASS;
}

SEC("xdp")
int strings(struct xdp_md *ctx)
{
	struct vals *r = get(&out);
	char buf[8] = "hellp";
	char small_buf[4];
	__u64 args[4] = { 42, -5, (__u64)(long)greeting, 42 };
	static const char fmt[] = "n=%d m=%05lld s=%s x=%x";

	if (!r)
		return XDP_ABORTED;
	args[2] = (__u64)(long)&greeting[0];
	r->v[0] = bpf_strncmp(buf, 4, "hell");
	r->v[1] = bpf_strncmp(buf, 5, "hello");
	r->v[2] = bpf_strncmp(buf, 6, "hel");
	r->v[3] = bpf_snprintf((char *)&r->v[8], 32, fmt, args, sizeof(args));
	r->v[4] = bpf_snprintf(small_buf, sizeof(small_buf), fmt, args, sizeof(args));
	r->v[5] = small_buf[3];
	r->v[7] = bpf_printk("pkt len %d on cpu %u", ctx->data_end - ctx->data,
			     bpf_get_smp_processor_id());
	return XDP_PASS;
}

SEC("xdp")
int redirect(struct xdp_md *ctx)
{
	struct vals *c = get(&cfg), *r = get(&out);
	if (!c || !r)
		return XDP_ABORTED;
	r->v[0] = bpf_redirect(5, 0);
	r->v[1] = bpf_redirect(5, 1);
	r->v[2] = bpf_redirect_map(&ports, 0, XDP_PASS);
	r->v[3] = bpf_redirect_map(&ports, 3, XDP_DROP);
	r->v[4] = bpf_redirect_map(&ports, 3, BPF_F_BROADCAST);
	r->v[5] = bpf_redirect_map(&ports, 1, 1 << 7);
	r->v[6] = bpf_redirect_map(&ports, 0x100000000ULL, XDP_TX);
	r->v[7] = bpf_redirect_map(&ports, 44, 3);
	return bpf_redirect_map(&ports, c->v[0], c->v[1]);
}

static __noinline int read_fields(struct xdp_md *ctx, struct vals *r)
{
	r->v[4] = ctx->ingress_ifindex;
	r->v[5] = ctx->rx_queue_index;
	return ctx->data_end - ctx->data;
}

SEC("xdp")
int ctx_fields(struct xdp_md *ctx)
{
	struct vals *r = get(&out);
	volatile struct xdp_md *spilled = ctx;
	__u8 bytes[8] = {};

	if (!r)
		return XDP_ABORTED;
	r->v[0] = read_fields(ctx, r);
	r->v[1] = ((struct xdp_md *)spilled)->data_end - ((struct xdp_md *)spilled)->data;
	r->v[2] = bpf_xdp_load_bytes(ctx, 2, bytes, 8);
	r->v[3] = *(__u64 *)bytes;
	r->v[7] = bpf_xdp_load_bytes(ctx, 60, bytes, 8);
	r->v[8] = bpf_xdp_load_bytes(ctx, 0x10000, bytes, 1);
	bytes[0] = 0x55;
	r->v[9] = bpf_xdp_store_bytes(ctx, 1, bytes, 2);
	r->v[10] = bpf_xdp_store_bytes(ctx, 63, bytes, 2);
	r->v[11] = bpf_xdp_get_buff_len(ctx);
	return XDP_TX;
}

/* jiffies64 between two monotonic readings, for the kernel comparison. */
SEC("xdp")
int clocks(struct xdp_md *ctx)
{
	struct vals *r = get(&out);
	if (!r)
		return XDP_ABORTED;
	r->v[0] = bpf_ktime_get_ns();
	r->v[1] = bpf_jiffies64();
	r->v[2] = bpf_ktime_get_ns();
	return XDP_PASS;
}

/* The name of the thread running the program (the kernel's test run: the
 * calling thread's). */
SEC("xdp")
int comm(struct xdp_md *ctx)
{
	struct vals *r = get(&out);
	char name[16];
	if (!r)
		return XDP_ABORTED;
	r->v[2] = bpf_get_current_comm(name, sizeof(name));
	__builtin_memcpy(&r->v[0], name, sizeof(name));
	return XDP_PASS;
}

/* A SYN proxy's steps on an Ethernet + IPv4/IPv6 + TCP frame: the cookie
 * for the SYN (only its MSS is stored: the secrets differ), the same
 * header with a wrong length, the ACK that acknowledges the cookie
 * (written into the frame, checked, and the frame restored), and the
 * frame's own acknowledgment number, which is no cookie. */
SEC("xdp")
int syncookie(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct vals *r = get(&out);
	if (!r)
		return XDP_ABORTED;
	if (data + 14 > end)
		return XDP_DROP;
	__u16 proto = *(__u16 *)(data + 12);
	int v6 = proto == __builtin_bswap16(0x86dd);
	void *ip = data + 14;
	if (ip + 40 + 60 > end)
		return XDP_DROP;
	__u32 *th = ip + (v6 ? 40 : 20);
	struct tcphdr *tcp = (void *)th;
	__u32 th_len = (((__u8 *)th)[12] >> 4) * 4;
	if (th_len < 20 || th_len > 60)
		return XDP_DROP;
	__s64 cookie, bad;
	if (v6) {
		cookie = bpf_tcp_raw_gen_syncookie_ipv6(ip, tcp, th_len);
		bad = bpf_tcp_raw_gen_syncookie_ipv6(ip, tcp, th_len == 20 ? 24 : 20);
	} else {
		cookie = bpf_tcp_raw_gen_syncookie_ipv4(ip, tcp, th_len);
		bad = bpf_tcp_raw_gen_syncookie_ipv4(ip, tcp, th_len == 20 ? 24 : 20);
	}
	r->v[0] = cookie < 0 ? cookie : cookie >> 32;
	r->v[1] = bad;
	r->v[2] = v6 ? bpf_tcp_raw_check_syncookie_ipv6(ip, tcp) : bpf_tcp_raw_check_syncookie_ipv4(ip, tcp);
	if (cookie >= 0) {
		__u32 seq = th[1], ack = th[2];
		th[1] = __builtin_bswap32(__builtin_bswap32(seq) + 1);
		th[2] = __builtin_bswap32((__u32)cookie + 1);
		r->v[3] = v6 ? bpf_tcp_raw_check_syncookie_ipv6(ip, tcp) : bpf_tcp_raw_check_syncookie_ipv4(ip, tcp);
		th[1] = seq;
		th[2] = ack;
	}
	return XDP_PASS;
}
