// A map left at max_entries 0 for its loader to size
// (`bpfjet trace --max-entries calls=N`).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u64);
} calls SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int on_getppid(void *ctx)
{
	__u32 k = 0;
	__u64 one = 1, *n = bpf_map_lookup_elem(&calls, &k);

	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&calls, &k, &one, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
