// XDP program for tests/preload/xdp_tools.sh: drops UDP to port 9999,
// passes everything else, and counts its UDP verdicts in `verdicts`
// (key 0: dropped, key 1: passed UDP).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2); __type(key, __u32); __type(value, __u64); } verdicts SEC(".maps");
SEC("xdp")
int udp_verdicts(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data; __u32 k = 1;
    if ((void *)(eth + 1) > end) return XDP_PASS;
    if (eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP) return XDP_PASS;
    struct udphdr *udp = (void *)ip + ip->ihl * 4;
    if ((void *)(udp + 1) > end) return XDP_PASS;
    if (udp->dest == bpf_htons(9999)) k = 0;
    __u64 *c = bpf_map_lookup_elem(&verdicts, &k);
    if (c) __sync_fetch_and_add(c, 1);
    return k == 0 ? XDP_DROP : XDP_PASS;
}
// The replacement program of the link test: passes everything, counting
// every UDP datagram as passed.
SEC("xdp")
int udp_count_only(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    __u32 k = 1;
    if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP) return XDP_PASS;
    __u64 *c = bpf_map_lookup_elem(&verdicts, &k);
    if (c) __sync_fetch_and_add(c, 1);
    return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
