// The XDP side of skel_app.c, the libbpf skeleton application of issue 12's
// acceptance: a UDP port watcher with a block list.
//
// - `watch_port` (.rodata) is set through the skeleton before load;
// - `watched`, `blocked_drops` (.bss) are read by the application through
//   the skeleton's mmap'd global data while the program runs;
// - `blocklist` (hash: IPv4 source -> drops) is updated by the application
//   while traffic runs: a datagram to the watched port from a listed source
//   is dropped and its drop count incremented;
// - every drop is reported through the `drops` ring buffer.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

const volatile __u16 watch_port = 0;

__u64 watched = 0;
__u64 blocked_drops = 0;

struct drop_event {
	__u32 saddr;
	__u16 dport;
	__u16 ip_len;
	__u64 nth_drop;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} blocklist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} drops SEC(".maps");

SEC("xdp")
int skel_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	struct udphdr *udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(watch_port))
		return XDP_PASS;
	__sync_fetch_and_add(&watched, 1);

	__u32 saddr = ip->saddr;
	__u64 *n = bpf_map_lookup_elem(&blocklist, &saddr);
	if (!n)
		return XDP_PASS;
	__u64 nth = __sync_fetch_and_add(n, 1) + 1;
	__sync_fetch_and_add(&blocked_drops, 1);
	struct drop_event *e = bpf_ringbuf_reserve(&drops, sizeof(*e), 0);
	if (e) {
		e->saddr = saddr;
		e->dport = bpf_ntohs(udp->dest);
		e->ip_len = bpf_ntohs(ip->tot_len);
		e->nth_drop = nth;
		bpf_ringbuf_submit(e, 0);
	}
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
