// An empty cgroup array, as libbpf-tools declare one for their cgroup
// filter: bpf_current_task_under_cgroup's answers for slot 0 (empty) and
// slot 3 (past the end) are kept in `answers`.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} cgroup_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __s64);
	__uint(max_entries, 2);
} answers SEC(".maps");

SEC("tracepoint/raw_syscalls/sys_enter")
int on_enter(void *ctx)
{
	__u32 k0 = 0, k1 = 1;
	__s64 a = bpf_current_task_under_cgroup(&cgroup_map, 0);
	__s64 b = bpf_current_task_under_cgroup(&cgroup_map, 3);

	bpf_map_update_elem(&answers, &k0, &a, 0);
	bpf_map_update_elem(&answers, &k1, &b, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
