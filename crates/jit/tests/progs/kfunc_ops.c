/* Every kfunc of bpfjet's NF library on operands taken from the packet,
 * results stored in the `out` map's value (one u64 per call), so a test can compare
 * the engines with the library's scalar definitions. Sizes are constants,
 * so the JIT takes the inline forms where there are some.
 *
 * Packet layout (at least 160 bytes):
 *   0..32   bucket          64..66  key16   68..72 key32   72..80 key64
 *   80..88  x (bit ops)     96..128 key b (compared with bytes 0..32)
 *   128..141 5-tuple / CRC data, 144..148 seed
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../../../../include/bpfjet_kfuncs.h"

/* eNetSTL's names and signatures. */
struct key_type_16 { char data[16]; };
struct pkt_5tuple { __u32 src_ip, dst_ip; __u16 src_port, dst_port; __u8 proto; } __attribute__((packed));
extern __u64 bpf_ffs(__u64 val) __ksym;
extern __u32 bpf_tzcnt_u32(__u32 val) __ksym;
extern __u32 bpf_find_u16_avx(const __u16 *arr, __u16 val) __ksym;
extern __u32 bpf__find_mask_u16_avx(const __u16 *arr, __u16 val) __ksym;
extern int bpf_k16_cmp_eq(const struct key_type_16 *key1, const struct key_type_16 *key2) __ksym;
extern __u32 bpf_crc32c_sse(const void *data, __u32 data__sz, __u32 init_val) __ksym;
extern __u32 bpf_crc32_hash(const void *key, __u32 key__sz, __u32 seed) __ksym;
extern void bpf_hash_smid_cnt_u32(const struct pkt_5tuple *buf, void *mem, __u64 size__sz, __u32 column_shift) __ksym;

#define SLOTS 48

struct input {
	__u8 bucket[32];
	__u8 pad[32];
	__u16 key16;
	__u16 pad2;
	__u32 key32;
	__u64 key64;
	__u64 x;
	__u64 pad3;
	__u8 b[32];
	__u8 data[16];
	__u32 seed;
	__u32 pad4[3];
};

struct results {
	__u64 r[SLOTS];
	struct input in;	/* the operands, copied from the packet */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct results);
} out SEC(".maps");

struct tables {
	__u32 cm[4 * 64];	/* bpfjet_cm_*: 4 rows of 64 */
	__u8 bloom[64];
	__u32 enet[8 * 16];	/* bpf_hash_smid_cnt_u32: 8 rows of 16 */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tables);
} tables SEC(".maps");


#define put(slot, v) (o->r[slot] = (v))

SEC("xdp")
int kfunc_ops(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct tables *t = bpf_map_lookup_elem(&tables, &zero);
	struct results *o = bpf_map_lookup_elem(&out, &zero);
	if (!t || !o)
		return XDP_ABORTED;
	if (data + sizeof(struct input) > end)
		return XDP_PASS;
	__builtin_memcpy(&o->in, data, sizeof(struct input));
	struct input *in = &o->in;

	put(0, bpfjet_ffs32((__u32)in->x));
	put(1, bpfjet_ffs64(in->x));
	put(2, bpfjet_ctz32((__u32)in->x));
	put(3, bpfjet_ctz64(in->x));
	put(4, bpfjet_clz32((__u32)(in->x >> 32)));
	put(5, bpfjet_clz64(in->x));
	put(6, bpfjet_popcount32((__u32)in->x));
	put(7, bpfjet_popcount64(in->x));
	put(8, bpfjet_find_u16(in->bucket, 32, in->key16));
	put(9, bpfjet_find_u32(in->bucket, 32, in->key32));
	put(10, bpfjet_find_u64(in->bucket, 32, in->key64));
	put(11, bpfjet_mask_u16(in->bucket, 32, in->key16));
	put(12, bpfjet_mask_u32(in->bucket, 32, in->key32));
	put(13, bpfjet_mask_u64(in->bucket, 32, in->key64));
	put(14, bpfjet_min_u16(in->bucket, 32));
	put(15, bpfjet_max_u32(in->bucket, 32));
	put(16, bpfjet_argmin_u32(in->bucket, 32));
	put(17, bpfjet_argmax_u16(in->bucket, 32));
	put(18, bpfjet_min_u64(in->bucket, 32));
	put(19, bpfjet_argmax_u64(in->bucket, 32));
	put(20, bpfjet_key16_eq((void *)in->bucket, (void *)in->b));
	put(21, bpfjet_key32_eq((void *)in->bucket, (void *)in->b));
	put(22, bpfjet_crc32c(in->data, 13, in->seed));
	put(23, bpfjet_cm_inc(in->data, 13, t->cm, sizeof(t->cm), 4));
	put(24, bpfjet_cm_min(in->data, 13, t->cm, sizeof(t->cm), 4));
	put(25, bpfjet_bloom_set(in->data, 13, t->bloom, sizeof(t->bloom), 3));
	put(26, bpfjet_bloom_test(in->bucket, 13, t->bloom, sizeof(t->bloom), 3));
	put(27, bpfjet_find_u16(in->bucket, 20, in->key16));	/* 10 lanes */
	put(28, bpfjet_crc32c(in->bucket, 32, in->seed));	/* words only */

	put(30, bpf_ffs(in->x));
	put(31, bpf_tzcnt_u32((__u32)in->x));
	put(32, bpf_find_u16_avx((void *)in->bucket, in->key16));
	put(33, bpf__find_mask_u16_avx((void *)in->bucket, in->key16));
	put(34, (__u32)bpf_k16_cmp_eq((void *)in->bucket, (void *)in->b));
	put(35, bpf_crc32c_sse(in->data, 13, in->seed));
	put(36, bpf_crc32_hash(in->data, 13, in->seed));
	bpf_hash_smid_cnt_u32((void *)in->data, t->enet, sizeof(t->enet), 4);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
