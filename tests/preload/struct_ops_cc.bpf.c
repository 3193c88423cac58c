/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A TCP congestion control in struct_ops (halves the window on loss, no
 * growth): a struct_ops map and its programs, which the kernel runs, made
 * through `bpfjet exec` (tests/preload/kernel_objects.sh registers it with
 * Debian's bpftool, lists it and unregisters it from other processes).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
char _license[] SEC("license") = "GPL";
SEC("struct_ops/bj_ssthresh")
__u32 BPF_PROG(bj_ssthresh, struct sock *sk)
{
	const struct tcp_sock *tp = (void *)sk;
	return tp->snd_cwnd / 2 > 2 ? tp->snd_cwnd / 2 : 2;
}
SEC("struct_ops/bj_cong_avoid")
void BPF_PROG(bj_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) {}
SEC("struct_ops/bj_undo_cwnd")
__u32 BPF_PROG(bj_undo_cwnd, struct sock *sk) { return ((struct tcp_sock *)sk)->snd_cwnd; }
SEC(".struct_ops")
struct tcp_congestion_ops bjcc = {
	.ssthresh = (void *)bj_ssthresh,
	.cong_avoid = (void *)bj_cong_avoid,
	.undo_cwnd = (void *)bj_undo_cwnd,
	.name = "bjcc",
};
