// SPDX-License-Identifier: GPL-2.0
/*
 * xdp_rx_hash: reads the NIC's RSS hash through the XDP metadata kfunc
 * bpf_xdp_metadata_rx_hash. The kernel only accepts such kfuncs in
 * device-bound programs; loaded the ordinary way, both the kernel and bpfjet
 * must refuse it (crates/verifier/tests/kfuncs.rs).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* From the kernel's include/net/xdp.h (not uapi); libbpf checks that the
 * extern's prototype matches vmlinux BTF, so the enum must be an enum. */
enum xdp_rss_hash_type {
	XDP_RSS_TYPE_NONE = 0,
};

extern int bpf_xdp_metadata_rx_hash(const struct xdp_md *ctx, __u32 *hash,
				    enum xdp_rss_hash_type *rss_type) __ksym;

SEC("xdp")
int xdp_rx_hash(struct xdp_md *ctx)
{
	enum xdp_rss_hash_type type = XDP_RSS_TYPE_NONE;
	__u32 hash = 0;

	if (bpf_xdp_metadata_rx_hash(ctx, &hash, &type))
		return XDP_PASS;
	return (hash & 1) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
