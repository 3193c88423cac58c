// CO-RE relocations of every family without vmlinux.h: a local view of
// xdp_md (resolved against bpfjet's context types), a flavored local type
// and an enum that no kernel has (their relocations resolve to "missing").
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct xdp_md___mine {
	__u64 data;
	__u64 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
} __attribute__((preserve_access_index));

struct nowhere___local {
	int x;
	unsigned int bits : 5;
} __attribute__((preserve_access_index));

enum nowhere_enum___local {
	NOWHERE___local = 3,
};

// Relocations in a subprogram travel with it into every program calling it.
static __attribute__((noinline)) int queue_of(struct xdp_md___mine *m)
{
	return m->ingress_ifindex + bpf_core_field_offset(struct xdp_md___mine, ingress_ifindex);
}

SEC("xdp")
int core_prog(struct xdp_md *ctx)
{
	struct xdp_md___mine *m = (void *)ctx;
	void *data = (void *)(long)m->data;
	void *data_end = (void *)(long)m->data_end;
	int r = m->ingress_ifindex;

	if (data + 1 > data_end)
		return XDP_ABORTED;
	r += bpf_core_type_exists(struct nowhere___local);
	r += bpf_core_type_size(struct nowhere___local);
	r += bpf_core_field_exists(struct nowhere___local, x);
	r += bpf_core_enum_value_exists(enum nowhere_enum___local, NOWHERE___local);
	if (bpf_core_field_exists(struct xdp_md___mine, data_meta))
		r += bpf_core_field_offset(struct xdp_md___mine, data_meta);
	return (r + queue_of(m)) & 3;
}

SEC("xdp")
int core_prog2(struct xdp_md *ctx)
{
	return queue_of((void *)ctx) & 3;
}

char _license[] SEC("license") = "GPL";
