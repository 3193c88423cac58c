// SPDX-License-Identifier: GPL-2.0
/*
 * spin_lock_counter: per-flow-class counters updated under a bpf_spin_lock
 * in the map value (ARRAY and HASH, one nested in a member struct), the way programs keep multi-word
 * statistics consistent across CPUs. Verified and run by
 * crates/verifier/tests/spin_lock_run.rs against the kernel.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

struct counter {
	struct bpf_spin_lock lock;
	__u32 packets;
	__u64 bytes;
	__u64 last_len;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct counter);
} totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct counter);
} by_len SEC(".maps");

/* The lock in a member struct: the kernel finds it there too. */
struct tagged {
	__u64 tag;
	struct counter c;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tagged);
} last SEC(".maps");

SEC("xdp")
int spin_lock_counter(struct xdp_md *ctx)
{
	__u64 len = ctx->data_end - ctx->data;
	__u32 key = len > 100, bucket = len / 64;
	struct counter fresh = {}, *c, *b;
	__u32 seen, zero = 0;
	struct tagged *t;

	c = bpf_map_lookup_elem(&totals, &key);
	if (!c)
		return XDP_ABORTED;
	bpf_spin_lock(&c->lock);
	c->packets++;
	c->bytes += len;
	c->last_len = len;
	seen = c->packets;
	bpf_spin_unlock(&c->lock);

	b = bpf_map_lookup_elem(&by_len, &bucket);
	if (!b) {
		bpf_map_update_elem(&by_len, &bucket, &fresh, BPF_NOEXIST);
		b = bpf_map_lookup_elem(&by_len, &bucket);
		if (!b)
			return XDP_ABORTED;
	}
	bpf_spin_lock(&b->lock);
	b->packets++;
	b->bytes += len;
	bpf_spin_unlock(&b->lock);

	t = bpf_map_lookup_elem(&last, &zero);
	if (t) {
		bpf_spin_lock(&t->c.lock);
		t->c.packets++;
		t->tag = len;
		bpf_spin_unlock(&t->c.lock);
	}

	/* Every third packet of a class is dropped: the verdict depends on the
	 * counter read under the lock. */
	return seen % 3 == 0 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
