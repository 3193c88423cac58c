// funclatency: latency histogram of one library function, entry/exit on a
// uprobe/uretprobe pair (libbpf-tools' funclatency, for a fixed target).
// FUNC_TARGET is "LIBRARY:SYMBOL", default libc's read(); the pair hands
// the entry time to the exit through a map keyed by the thread.
#include "trace.h"

#ifndef FUNC_TARGET
#define FUNC_TARGET "libc.so.6:read"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, __u64);
} starts SEC(".maps");

/* Key: log2(latency in ns); value: calls. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HIST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} hist SEC(".maps");

SEC("uprobe/" FUNC_TARGET)
int BPF_KPROBE(funclatency_entry)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 ts;

	if (!traced())
		return 0;
	ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&starts, &id, &ts, BPF_ANY);
	return 0;
}

SEC("uretprobe/" FUNC_TARGET)
int BPF_KRETPROBE(funclatency_exit)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *start = bpf_map_lookup_elem(&starts, &id), *n;
	__u32 slot;

	if (!start)
		return 0;
	slot = log2_slot(bpf_ktime_get_ns() - *start);
	n = bpf_map_lookup_elem(&hist, &slot);
	if (n)
		__sync_fetch_and_add(n, 1);
	bpf_map_delete_elem(&starts, &id);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
