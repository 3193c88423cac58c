// CO-RE against the kernel's own types: built with a vmlinux.h generated at
// test time, so every struct access below carries a relocation. The values
// the relocations resolve to are written into `results`; the kernel (via
// libbpf) and bpfjet must produce the same map.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

// Not in every libbpf's bpf_core_read.h.
#define field_signed(type, field) \
	__builtin_preserve_field_info(((type *)0)->field, BPF_FIELD_SIGNED)
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 32);
	__type(key, __u32);
	__type(value, __u64);
} results SEC(".maps");

static __always_inline void put(__u32 slot, __u64 value)
{
	bpf_map_update_elem(&results, &slot, &value, 0);
}

// A program's own view of xdp_md with 8-byte fields: CO-RE narrows the
// loads to the target's 4-byte fields at their uapi offsets.
struct xdp_md___wide {
	__u64 data;
	__u64 data_end;
} __attribute__((preserve_access_index));

// sk_buff as a program may declare it: flat, where the kernel nests
// `tstamp` and `len` inside anonymous unions/structs.
struct sk_buff___flat {
	__u64 tstamp;
	unsigned int len;
	unsigned char cb[48];
} __attribute__((preserve_access_index));

// A kernel type with a field no kernel has.
struct task_struct___future {
	int field_from_the_future;
} __attribute__((preserve_access_index));

struct no_such_type_anywhere {
	int a;
};

enum xdp_action___future {
	XDP_TELEPORT___future = 42,
};

SEC("xdp")
int vmlinux_probe(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct xdp_md___wide *wide = (void *)ctx;
	void *wdata = (void *)(long)wide->data;
	void *wend = (void *)(long)wide->data_end;

	put(0, wend - wdata);
	put(1, bpf_core_field_exists(struct task_struct, pid));
	put(2, bpf_core_field_exists(struct task_struct___future, field_from_the_future));
	put(3, bpf_core_field_size(struct task_struct, pid));
	put(4, bpf_core_field_offset(struct task_struct, pid));
	put(5, field_signed(struct task_struct, pid));
	put(6, bpf_core_field_offset(struct task_struct, comm[3]));
	put(7, bpf_core_field_size(struct task_struct, comm));
	put(8, bpf_core_type_exists(struct task_struct));
	put(9, bpf_core_type_exists(struct no_such_type_anywhere));
	put(10, bpf_core_type_size(struct sk_buff));
	put(11, bpf_core_type_id_kernel(struct task_struct));
	put(12, bpf_core_enum_value_exists(enum xdp_action, XDP_REDIRECT));
	put(13, bpf_core_enum_value(enum xdp_action, XDP_REDIRECT));
	put(14, bpf_core_enum_value_exists(enum xdp_action___future, XDP_TELEPORT___future));
	put(15, bpf_core_field_offset(struct sk_buff___flat, tstamp));
	put(16, bpf_core_field_offset(struct sk_buff___flat, len));
	put(17, bpf_core_field_offset(struct sk_buff___flat, cb[5]));
	put(18, bpf_core_type_matches(struct iphdr));
	put(19, bpf_core_field_exists(struct xdp_md, egress_ifindex));
	put(20, field_signed(struct sk_buff, len));
	put(21, bpf_core_type_size(enum xdp_action));
	put(26, bpf_core_type_id_kernel(struct xdp_md));
	put(27, bpf_core_type_size(struct xdp_md));

	// Packet headers through vmlinux.h types: relocated direct loads,
	// and the iphdr bitfields through BPF_CORE_READ_BITFIELD.
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_ABORTED;
	put(22, bpf_ntohs(eth->h_proto));
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return XDP_DROP;
	put(23, BPF_CORE_READ_BITFIELD(ip, ihl));
	put(24, BPF_CORE_READ_BITFIELD(ip, version));
	put(25, ip->ttl);
	if (ip->protocol == 17)
		return bpf_core_enum_value(enum xdp_action, XDP_TX);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
