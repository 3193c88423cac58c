/* Multi-buffer (frags) XDP frames: each program reports what it saw in the
 * `out` array and leaves its marks in the packet, so a test run on bpfjet and
 * on the kernel can be compared on action, output bytes and maps. The first
 * 12 bytes of every test packet are three little-endian s32 parameters. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __type(key, __u32);
    __type(value, __s64);
    __uint(max_entries, 64);
} out SEC(".maps");

/* A buffer bigger than the stack for copies across several fragments. */
struct big { unsigned char bytes[6000]; };
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __type(key, __u32);
    __type(value, struct big);
    __uint(max_entries, 1);
} bigbuf SEC(".maps");

static __always_inline void put(__u32 k, __s64 v)
{
    bpf_map_update_elem(&out, &k, &v, BPF_ANY);
}

static __always_inline __s64 linear(struct xdp_md *ctx)
{
    return (long)ctx->data_end - (long)ctx->data;
}

/* The three parameters from the packet head (0 when it is too short). */
static __always_inline int params(struct xdp_md *ctx, __s32 p[3])
{
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    if (data + 12 > end)
        return -1;
    __builtin_memcpy(p, data, 12);
    return 0;
}

SEC("xdp.frags")
int lens(struct xdp_md *ctx)
{
    put(0, bpf_xdp_get_buff_len(ctx));
    put(1, linear(ctx));
    return XDP_PASS;
}

/* The same in a program without BPF_F_XDP_HAS_FRAGS: a test run still
 * hands it a multi-buffer frame. */
SEC("xdp")
int lens_plain(struct xdp_md *ctx)
{
    put(0, bpf_xdp_get_buff_len(ctx));
    put(1, linear(ctx));
    unsigned char b[8] = {};
    put(2, bpf_xdp_load_bytes(ctx, linear(ctx), b, 8));
    return XDP_PASS;
}

/* 16-byte loads and stores at offsets around the linear end, the fragment
 * borders and the frame's end; one 6000-byte load across several pieces. */
static __always_inline void load16(struct xdp_md *ctx, __u32 slot, __u32 off)
{
    __u64 b[2] = {};
    put(slot, bpf_xdp_load_bytes(ctx, off, b, 16));
    put(slot + 1, b[0]);
    put(slot + 2, b[1]);
}

static __always_inline void store16(struct xdp_md *ctx, __u32 slot, __u32 off, __u64 mark)
{
    __u64 b[2] = { mark, ~mark };
    put(slot, bpf_xdp_store_bytes(ctx, off, b, 16));
}

SEC("xdp.frags")
int copies(struct xdp_md *ctx)
{
    __u32 lin = linear(ctx);
    __u32 tot = bpf_xdp_get_buff_len(ctx);
    load16(ctx, 0, 0);
    load16(ctx, 3, lin - 8);          /* linear | frag 0 */
    load16(ctx, 6, lin);              /* frag 0 start */
    load16(ctx, 9, lin + 4096 - 5);   /* frag 0 | frag 1 */
    load16(ctx, 12, tot - 16);        /* the last 16 bytes */
    load16(ctx, 15, tot - 15);        /* one past the end: EINVAL */
    load16(ctx, 18, 0x10000);         /* offset over 0xffff: EFAULT */
    store16(ctx, 21, lin - 3, 0x1122334455667788ULL);
    store16(ctx, 22, lin + 4096 - 9, 0x99aabbccddeeff00ULL);
    store16(ctx, 23, tot - 16, 0x0102030405060708ULL);
    store16(ctx, 24, tot - 8, 0x0807060504030201ULL); /* past the end */
    __u32 zero = 0;
    struct big *big = bpf_map_lookup_elem(&bigbuf, &zero);
    if (!big)
        return XDP_ABORTED;
    put(25, bpf_xdp_load_bytes(ctx, 100, big->bytes, sizeof(big->bytes)));
    put(26, bpf_xdp_store_bytes(ctx, tot > 6100 ? tot - 6000 : 0, big->bytes,
                                sizeof(big->bytes)));
    return XDP_TX;
}

/* adjust_head by the third parameter, then adjust_tail by the first and
 * the second; lengths after each step. */
SEC("xdp.frags")
int adjust(struct xdp_md *ctx)
{
    __s32 p[3];
    if (params(ctx, p))
        return XDP_ABORTED;
    put(0, bpf_xdp_adjust_head(ctx, p[2]));
    put(1, bpf_xdp_get_buff_len(ctx));
    put(2, linear(ctx));
    put(3, bpf_xdp_adjust_tail(ctx, p[0]));
    put(4, bpf_xdp_get_buff_len(ctx));
    put(5, linear(ctx));
    put(6, bpf_xdp_adjust_tail(ctx, p[1]));
    put(7, bpf_xdp_get_buff_len(ctx));
    put(8, linear(ctx));
    /* Mark the last byte, wherever the tail now is. */
    __u32 tot = bpf_xdp_get_buff_len(ctx);
    unsigned char m = 0xee;
    put(9, bpf_xdp_store_bytes(ctx, tot - 1, &m, 1));
    return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
