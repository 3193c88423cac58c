// Programs in DEVMAP entries and BPF_F_BROADCAST, for
// tests/preload/devmap_egress.sh. The ingress program sends UDP datagrams
// by destination port:
//   7001  tx_ports[0]: an entry with the egress program
//   7002  broadcast over `ports`, the ingress device excluded
//   7003  tx_ports[1]: an entry without a program
//   7004  broadcast over `ports`, the ingress device included
//   7005  cpus[0]: a CPUMAP entry with the cpu program (to the stack)
// The egress program stamps the payload's first 8 bytes with the egress
// and ingress ifindexes, counts per egress ifindex, and drops a datagram
// whose payload byte 8 is 'D'. The cpu program stamps 0xc0c0 and the
// ingress ifindex, counts under egress ifindex 0, clears the UDP checksum
// (the stack checks it) and drops 'D' too.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
    __uint(type, BPF_MAP_TYPE_DEVMAP);
    __type(key, __u32);
    __type(value, struct bpf_devmap_val);
    __uint(max_entries, 4);
} tx_ports SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
    __type(key, __u32);
    __type(value, struct bpf_devmap_val);
    __uint(max_entries, 8);
} ports SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __type(key, __u32);
    __type(value, __u64);
    __uint(max_entries, 16);
} egress_seen SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_CPUMAP);
    __type(key, __u32);
    __type(value, struct bpf_cpumap_val);
    __uint(max_entries, 2);
} cpus SEC(".maps");

static __always_inline void count(__u32 egress) {
    __u64 one = 1, *n = bpf_map_lookup_elem(&egress_seen, &egress);
    if (n)
        __sync_fetch_and_add(n, 1);
    else
        bpf_map_update_elem(&egress_seen, &egress, &one, BPF_NOEXIST);
}

static __always_inline unsigned char *payload(void *data, void *data_end, __u16 *port) {
    struct ethhdr *eth = data;
    struct iphdr *ip = (void *)(eth + 1);
    struct udphdr *udp = (void *)(ip + 1);
    unsigned char *p = (void *)(udp + 1);
    if ((void *)(p + 9) > data_end)
        return 0;
    if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
        return 0;
    *port = bpf_ntohs(udp->dest);
    return p;
}

SEC("xdp")
int xdp_fwd(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *data_end = (void *)(long)ctx->data_end;
    __u16 port;
    if (!payload(data, data_end, &port))
        return XDP_PASS;
    switch (port) {
    case 7001: return bpf_redirect_map(&tx_ports, 0, 0);
    case 7002: return bpf_redirect_map(&ports, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
    case 7003: return bpf_redirect_map(&tx_ports, 1, 0);
    case 7004: return bpf_redirect_map(&ports, 0, BPF_F_BROADCAST);
    case 7005: return bpf_redirect_map(&cpus, 0, 0);
    default: return XDP_PASS;
    }
}

SEC("xdp/devmap")
int xdp_egress(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *data_end = (void *)(long)ctx->data_end;
    __u16 port;
    unsigned char *p = payload(data, data_end, &port);
    if (!p)
        return XDP_PASS;
    __u32 egress = ctx->egress_ifindex, ingress = ctx->ingress_ifindex;
    __builtin_memcpy(p, &egress, 4);
    __builtin_memcpy(p + 4, &ingress, 4);
    count(egress);
    // UDP checksum: the receiver captures raw frames, it is not checked.
    return p[8] == 'D' ? XDP_DROP : XDP_PASS;
}

// Not a devmap program: refused in a devmap entry.
SEC("xdp")
int xdp_plain(struct xdp_md *ctx) { return XDP_PASS; }

// Same, multi-buffer: refused in a devmap whose first entry program is
// not (the kernel's map owner rule).
SEC("xdp.frags/devmap")
int xdp_egress_frags(struct xdp_md *ctx) { return XDP_PASS; }

SEC("xdp/cpumap")
int xdp_cpu(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *data_end = (void *)(long)ctx->data_end;
    __u16 port;
    unsigned char *p = payload(data, data_end, &port);
    if (!p)
        return XDP_PASS;
    __u32 tag = 0xc0c0, ingress = ctx->ingress_ifindex;
    __builtin_memcpy(p, &tag, 4);
    __builtin_memcpy(p + 4, &ingress, 4);
    ((struct udphdr *)p - 1)->check = 0;
    count(0);
    return p[8] == 'D' ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
