// SPDX-License-Identifier: Apache-2.0
// A bpf_spin_lock in global data (`.data.NAME`), as graph programs keep
// their lock next to a root: through bpf() the map's value type is the
// section's DATASEC, whose variables give the lock's offset.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define private(name) SEC(".data." #name) __attribute__((visibility("hidden"), aligned(8)))

private(L) struct bpf_spin_lock lock;
private(L) __u64 packets;
private(L) __u64 bytes;

SEC("xdp")
int datasec_lock(struct xdp_md *ctx)
{
	__u64 len = ctx->data_end - ctx->data;

	bpf_spin_lock(&lock);
	packets++;
	bytes += len;
	bpf_spin_unlock(&lock);
	return len & 1 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
