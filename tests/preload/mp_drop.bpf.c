// Second program of tests/preload/xdp_multiprog.sh: drops UDP to port 9999
// (counted in `dropped`), passes the rest. Runs after mp_count (priority
// 20); the chain goes on after XDP_PASS only (the dispatcher's default), so
// its drops are the dispatcher's verdict. A static helper function keeps a
// BPF-to-BPF call inside the EXT program that replaces a dispatcher slot.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <xdp/xdp_helpers.h>
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } dropped SEC(".maps");
struct {
    __uint(priority, 20);
    __uint(XDP_PASS, 1);
} XDP_RUN_CONFIG(mp_drop);
static __attribute__((noinline)) int to_port(struct xdp_md *ctx, __u16 port) {
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return 0;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP) return 0;
    struct udphdr *udp = (void *)ip + ip->ihl * 4;
    if ((void *)(udp + 1) > end) return 0;
    return udp->dest == bpf_htons(port);
}
SEC("xdp")
int mp_drop(struct xdp_md *ctx) {
    if (!to_port(ctx, 9999)) return XDP_PASS;
    __u32 k = 0;
    __u64 *c = bpf_map_lookup_elem(&dropped, &k);
    if (c) __sync_fetch_and_add(c, 1);
    return XDP_DROP;
}
char _license[] SEC("license") = "GPL";
