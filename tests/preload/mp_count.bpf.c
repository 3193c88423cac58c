// First program of tests/preload/xdp_multiprog.sh (libxdp's dispatcher):
// counts UDP datagrams by destination port in `seen` (key 0: port 9999,
// key 1: any other) and passes everything, so the chain goes on.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <xdp/xdp_helpers.h>
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 2); __type(key, __u32); __type(value, __u64); } seen SEC(".maps");
struct {
    __uint(priority, 10);
    __uint(XDP_PASS, 1);
} XDP_RUN_CONFIG(mp_count);
SEC("xdp")
int mp_count(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP) return XDP_PASS;
    struct udphdr *udp = (void *)ip + ip->ihl * 4;
    if ((void *)(udp + 1) > end) return XDP_PASS;
    __u32 k = udp->dest == bpf_htons(9999) ? 0 : 1;
    __u64 *c = bpf_map_lookup_elem(&seen, &k);
    if (c) __sync_fetch_and_add(c, 1);
    return XDP_PASS;
}
char _license[] SEC("license") = "GPL";
