/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The empty XDP program: every engine's harness baseline, and the empty
 * target that measures the fresh-packet wrapper's own cost. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int empty(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
