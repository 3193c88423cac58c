// SPDX-License-Identifier: GPL-2.0
/*
 * Samples and system calls in one object: a perf_event program next to a
 * raw sys_enter program (every call) and a sys_exit_getppid one, so that
 * samples land in the middle of system-call hooks and program runs.
 * Slots: 0 calls entered, 1 samples, 2 getppid returns.
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static void bump(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);
	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("raw_tracepoint/sys_enter")
int on_enter(void *ctx)
{
	bump(0);
	return 0;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	bump(1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_getppid")
int on_getppid(void *ctx)
{
	bump(2);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
