// fsdist: latency histograms of read(2) and write(2) in the traced process,
// the entry/exit pair of "Pairwise BPF programs should be optimized
// together": the entry stores a timestamp in a hash map keyed by the
// thread, the exit looks it up, adds the latency to a log2 histogram and
// deletes it.
#include "trace.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, __u64);
} starts SEC(".maps");

/* Key: op * HIST_SLOTS + log2(latency in ns); value: calls. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RW_OPS * HIST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} hist SEC(".maps");

static __always_inline int enter(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 ts;

	if (!traced())
		return 0;
	ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&starts, &id, &ts, BPF_ANY);
	return 0;
}

static __always_inline int leave(__u32 op)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *start = bpf_map_lookup_elem(&starts, &id), *n;
	__u32 slot;

	if (!start)
		return 0;
	slot = op * HIST_SLOTS + log2_slot(bpf_ktime_get_ns() - *start);
	n = bpf_map_lookup_elem(&hist, &slot);
	if (n)
		__sync_fetch_and_add(n, 1);
	bpf_map_delete_elem(&starts, &id);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_read")
int fsdist_enter_read(void *ctx) { return enter(); }

SEC("tracepoint/syscalls/sys_enter_write")
int fsdist_enter_write(void *ctx) { return enter(); }

SEC("tracepoint/syscalls/sys_exit_read")
int fsdist_exit_read(void *ctx) { return leave(RW_READ); }

SEC("tracepoint/syscalls/sys_exit_write")
int fsdist_exit_write(void *ctx) { return leave(RW_WRITE); }

char LICENSE[] SEC("license") = "GPL";
