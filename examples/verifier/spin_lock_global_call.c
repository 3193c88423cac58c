// SPDX-License-Identifier: GPL-2.0
/*
 * spin_lock_global_call: calls a global (non-static) function while holding
 * a bpf_spin_lock. The kernel refuses that ("global function calls are not
 * allowed while holding a lock"), while a static function would be fine;
 * crates/verifier/tests/spin_lock_run.rs checks bpfjet agrees on both.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct counter {
	struct bpf_spin_lock lock;
	__u32 packets;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counter);
} totals SEC(".maps");

#ifdef STATIC_BUMP
static
#endif
__attribute__((noinline)) int bump(int x)
{
	return x + 1;
}

SEC("xdp")
int spin_lock_global_call(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct counter *c = bpf_map_lookup_elem(&totals, &key);

	if (!c)
		return XDP_ABORTED;
	bpf_spin_lock(&c->lock);
	c->packets = bump(c->packets);
	bpf_spin_unlock(&c->lock);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
