// SPDX-License-Identifier: GPL-2.0
/*
 * The network function of the netns end-to-end test: one program whose
 * behaviour a control plane switches at run time through `mode[0]`, so one
 * `bpfjet run` serves every check and the switch itself is tested.
 *
 *   mode[0] = 1 DROP, 2 PASS, 3 TX (MAC swap echo), 4 REDIRECT to mode[1]
 *
 * Frames that are not IPv4 (ARP) always pass, so the kernel behind the TAP
 * can resolve neighbours whatever the mode.
 *
 * Built with -DALWAYS_TX it echoes every IPv4 frame whatever the mode: the
 * object the test hot-replaces the running one with (same `mode` map, so
 * the replace keeps it).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} mode SEC(".maps");

SEC("xdp")
int netns_nf(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 k0 = 0, k1 = 1;
	__u32 *m, *target;
	unsigned char tmp[ETH_ALEN];

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	m = bpf_map_lookup_elem(&mode, &k0);
	if (!m)
		return XDP_ABORTED;
#ifdef ALWAYS_TX
	__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
	return XDP_TX;
#endif
	switch (*m) {
	case 1:
		return XDP_DROP;
	case 3:
		__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
		__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
		__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
		return XDP_TX;
	case 4:
		target = bpf_map_lookup_elem(&mode, &k1);
		if (!target)
			return XDP_ABORTED;
		return bpf_redirect(*target, 0);
	default:
		return XDP_PASS;
	}
}

char _license[] SEC("license") = "GPL";
