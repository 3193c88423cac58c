// SPDX-License-Identifier: GPL-2.0
/*
 * A sampling profiler in the shape of libbpf-tools' profile: a perf_event
 * program counting samples per thread, where the sampled thread was
 * (inside spin(), whose address range the test passes as globals: the
 * target is built without PIE), its user stack (BPF_F_USER_STACK) and its
 * kernel stack (none: the samples interrupt user code, so -EFAULT as the
 * kernel answers for a user-mode sample).
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

const volatile __u64 spin_lo;
const volatile __u64 spin_hi;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} by_tid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 256);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 32 * sizeof(__u64));
} stacks SEC(".maps");

/* 0 samples, 1 ip in spin(), 2 user stack found, 3 kernel stack -EFAULT,
 * 4 the sample period, 5 user-mode cs, 6 a stack starting in spin(). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 7);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static void bump(__u32 slot, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);
	if (v)
		__sync_fetch_and_add(v, n);
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 one = 1, *n = bpf_map_lookup_elem(&by_tid, &tid);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&by_tid, &tid, &one, BPF_NOEXIST);
	bump(0, 1);
	__u64 ip = ctx->regs.rip;
	if (ip >= spin_lo && ip < spin_hi)
		bump(1, 1);
	/* Reuse: two stacks may hash to one id (-EEXIST without it). */
	long user = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK | BPF_F_REUSE_STACKID);
	if (user >= 0)
		bump(2, 1);
	if (bpf_get_stackid(ctx, &stacks, 0) == -14)
		bump(3, 1);
	__u32 slot = 4;
	__u64 *period = bpf_map_lookup_elem(&counts, &slot);
	if (period)
		*period = ctx->sample_period;
	if (ctx->regs.cs == 0x33)
		bump(5, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
