// Programs of tests/preload/tail_calls.sh: `tc_entry` tail-calls through
// `jumps` at the slot the UDP destination port picks (9999: 0, 7777: 1,
// 8888: 2) and passes when the slot is empty; the targets decide. A
// frags program (`tc_frags`) is of another class, which the kernel keeps
// out of a PROG_ARRAY its non-frags programs own.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
struct { __uint(type, BPF_MAP_TYPE_PROG_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, __u32); } jumps SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, __u64); } hits SEC(".maps");
static __always_inline void hit(__u32 k) {
    __u64 *c = bpf_map_lookup_elem(&hits, &k);
    if (c) __sync_fetch_and_add(c, 1);
}
SEC("xdp")
int tc_entry(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP) return XDP_PASS;
    struct udphdr *udp = (void *)(ip + 1);
    if ((void *)(udp + 1) > end) return XDP_PASS;
    __u32 slot = udp->dest == bpf_htons(9999) ? 0 : udp->dest == bpf_htons(7777) ? 1 : 2;
    bpf_tail_call(ctx, &jumps, slot);
    hit(3);
    return XDP_PASS;
}
SEC("xdp")
int tc_drop(struct xdp_md *ctx) { hit(0); return XDP_DROP; }
SEC("xdp")
int tc_tx(struct xdp_md *ctx) { hit(1); return XDP_TX; }
SEC("xdp")
int tc_abort(struct xdp_md *ctx) { hit(2); return XDP_ABORTED; }
SEC("xdp.frags")
int tc_frags(struct xdp_md *ctx) { return XDP_DROP; }
char _license[] SEC("license") = "GPL";
