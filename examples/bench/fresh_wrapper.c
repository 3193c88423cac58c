/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The kernel side of `bpfjet bench --mode fresh`. BPF_PROG_TEST_RUN with
 * `repeat` runs a program again and again on the same buffer, so a program
 * that rewrites or encapsulates the packet would take another path from the
 * second iteration on. This wrapper runs first on every iteration: it puts
 * the packet back where and as it was (head, length, bytes) and tail-calls
 * the program under test in `target[0]`. Its own cost is measured with an
 * empty target and subtracted by the harness.
 *
 * The packet's original position is recorded on the first iteration as the
 * distance between the packet and the context (both stay put across the
 * iterations of one test run); pointer subtraction needs the privileges the
 * benchmark runs with anyway.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define MAX_PACKET 3840

struct original {
	__u32 len;
	__u32 pad;
	/* ctx-to-data distance of the fresh frame; 0 until the first run. */
	__s64 head;
	__u8 bytes[MAX_PACKET];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct original);
} original SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} target SEC(".maps");

SEC("xdp")
int fresh_wrapper(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct original *o = bpf_map_lookup_elem(&original, &zero);
	long head, len;

	if (!o)
		return XDP_ABORTED;
	head = (long)ctx->data - (long)ctx;
	if (o->head == 0)
		o->head = head;
	else if (head != o->head && bpf_xdp_adjust_head(ctx, (int)(o->head - head)))
		return XDP_ABORTED;
	len = (long)ctx->data_end - (long)ctx->data;
	if (len != o->len && bpf_xdp_adjust_tail(ctx, (int)(o->len - len)))
		return XDP_ABORTED;
	len = o->len;
	if (len < 1 || len > MAX_PACKET)
		return XDP_ABORTED;
	if (bpf_xdp_store_bytes(ctx, 0, o->bytes, len))
		return XDP_ABORTED;
	bpf_tail_call(ctx, &target, 0);
	return XDP_ABORTED;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
