// SPDX-License-Identifier: GPL-2.0
/*
 * xdp_redirect: an L2 forwarding plane on a DEVMAP.
 *
 *   destination MAC --mac_table--> port --bpf_redirect_map(tx_ports)--> egress
 *   unknown unicast              --> the ingress interface's default port
 *   broadcast / multicast        --> every port but the ingress one
 *
 * When the chosen slot of tx_ports is empty, bpf_redirect_map returns the
 * fallback action carried in the low bits of its flags (.rodata `fallback_action`)
 * instead of XDP_REDIRECT, so an unconfigured port degrades to the stack.
 */
#include "common.h"

#define MAX_PORTS 64

/* .rodata: action when the DEVMAP slot is empty (XDP_PASS or XDP_DROP). */
const volatile __u64 fallback_action = XDP_PASS;

struct mac_key {
	__u8 addr[ETH_ALEN];
	__u8 pad[2];
};

struct port_ref {
	__u32 port; /* slot in tx_ports */
	__u32 flags; /* reserved */
};

struct port_stats {
	__u64 packets;
	__u64 bytes;
};

/* Slot -> egress ifindex (value: struct bpf_devmap_val, 4-byte ifindex form). */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct mac_key);
	__type(value, struct port_ref);
} mac_table SEC(".maps");

/* Ingress ifindex -> port for unknown unicast destinations. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, struct port_ref);
} default_port SEC(".maps");

/* Per port; slot MAX_PORTS counts floods, MAX_PORTS + 1 unknown destinations. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_PORTS + 2);
	__type(key, __u32);
	__type(value, struct port_stats);
} port_stats SEC(".maps");

#define STATS_FLOOD MAX_PORTS
#define STATS_UNKNOWN (MAX_PORTS + 1)

static __always_inline void account(__u32 slot, __u64 bytes)
{
	struct port_stats *ps = bpf_map_lookup_elem(&port_stats, &slot);

	if (ps) {
		ps->packets++;
		ps->bytes += bytes;
	}
}

SEC("xdp")
int xdp_redirect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 len = data_end - data;
	struct ethhdr *eth = data;
	struct mac_key mk = {};
	struct port_ref *ref;
	__u32 ingress;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;

	if (eth->h_dest[0] & 1) {
		/* Group bit set: flood to all ports except the one it came in on. */
		account(STATS_FLOOD, len);
		return bpf_redirect_map(&tx_ports, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
	}

	mac_copy(mk.addr, eth->h_dest);
	ref = bpf_map_lookup_elem(&mac_table, &mk);
	if (!ref) {
		ingress = ctx->ingress_ifindex;
		ref = bpf_map_lookup_elem(&default_port, &ingress);
		if (!ref) {
			account(STATS_UNKNOWN, len);
			return XDP_PASS;
		}
	}
	if (ref->port >= MAX_PORTS)
		return XDP_DROP;
	account(ref->port, len);
	return bpf_redirect_map(&tx_ports, ref->port, fallback_action & 0x3);
}

char LICENSE[] SEC("license") = "GPL";
