// bytes-per-call: for libc's write(), the size asked for (third argument,
// recorded at the entry) against what the call returned (at the exit):
// log2 histograms of both, and how many calls wrote less than asked or
// failed. The pair hands the argument over through a map keyed by thread.
#include "trace.h"

#ifndef FUNC_TARGET
#define FUNC_TARGET "libc.so.6:write"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, __u64);
} asked SEC(".maps");

/* Key: log2(bytes asked) in 0..HIST_SLOTS, log2(bytes returned) in
 * HIST_SLOTS..2*HIST_SLOTS; value: calls. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * HIST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} sizes SEC(".maps");

/* Key 0: short writes (0 <= ret < asked), 1: failed calls (ret < 0). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} outcomes SEC(".maps");

static __always_inline void bump(void *map, __u32 key)
{
	__u64 *n = bpf_map_lookup_elem(map, &key);

	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("uprobe/" FUNC_TARGET)
int BPF_KPROBE(bytes_entry, int fd, const void *buf, __u64 count)
{
	__u64 id = bpf_get_current_pid_tgid();

	if (!traced())
		return 0;
	bpf_map_update_elem(&asked, &id, &count, BPF_ANY);
	return 0;
}

SEC("uretprobe/" FUNC_TARGET)
int BPF_KRETPROBE(bytes_exit, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *count = bpf_map_lookup_elem(&asked, &id);

	if (!count)
		return 0;
	bump(&sizes, log2_slot(*count));
	if (ret < 0)
		bump(&outcomes, 1);
	else {
		bump(&sizes, HIST_SLOTS + log2_slot(ret));
		if ((__u64)ret < *count)
			bump(&outcomes, 0);
	}
	bpf_map_delete_elem(&asked, &id);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
