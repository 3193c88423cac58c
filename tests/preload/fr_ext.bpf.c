// Extension of tests/preload/freplace.sh: the same verdict logic as an EXT
// program replacing fr_target's `slot` and as a plain XDP program (what the
// kernel runs as the oracle: this kernel refuses EXT loads). Drops UDP to
// port 9999, bounces (XDP_TX) UDP to 7777, passes the rest; counts its
// calls in its own map. `bad_args` has a signature `slot` does not have.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } calls SEC(".maps");
static __always_inline int verdict(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    __u32 k = 0;
    __u64 *c = bpf_map_lookup_elem(&calls, &k);
    if (c) __sync_fetch_and_add(c, 1);
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP) return XDP_PASS;
    struct udphdr *udp = (void *)(ip + 1);
    if ((void *)(udp + 1) > end) return XDP_PASS;
    if (udp->dest == bpf_htons(9999)) return XDP_DROP;
    if (udp->dest == bpf_htons(7777)) return XDP_TX;
    return XDP_PASS;
}
SEC("freplace/slot")
int ext_slot(struct xdp_md *ctx) { return verdict(ctx); }
SEC("xdp")
int ext_as_xdp(struct xdp_md *ctx) { return verdict(ctx); }
SEC("freplace/slot")
int bad_args(struct xdp_md *ctx, int extra) { return extra ? XDP_DROP : verdict(ctx); }
char _license[] SEC("license") = "GPL";
