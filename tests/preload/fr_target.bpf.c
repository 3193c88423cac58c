// Target program of tests/preload/freplace.sh: its global function `slot`
// is what an EXT program replaces (as libxdp's dispatcher's prog0..prog9);
// `helper` is static and cannot be replaced. The entry counts the drops
// `slot` decides, so its own code runs around the replaced call.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } drops SEC(".maps");
static __attribute__((noinline)) int helper(struct xdp_md *ctx) {
    return ctx->data_end - ctx->data > 1000 ? XDP_ABORTED : XDP_PASS;
}
__attribute__((noinline)) int slot(struct xdp_md *ctx) {
    volatile int ret = XDP_PASS;
    if (!ctx)
        return XDP_ABORTED;
    return ret;
}
SEC("xdp")
int fr_target(struct xdp_md *ctx) {
    int ret = slot(ctx);
    if (ret == XDP_DROP) {
        __u32 k = 0;
        __u64 *c = bpf_map_lookup_elem(&drops, &k);
        if (c) __sync_fetch_and_add(c, 1);
    }
    if (helper(ctx) == XDP_ABORTED)
        return XDP_ABORTED;
    return ret;
}
char _license[] SEC("license") = "GPL";
