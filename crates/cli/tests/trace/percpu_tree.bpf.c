/* A per-CPU counter bumped without an atomic, as the kernel lets a program
 * do (it runs with migration off): each getppid of the traced tree adds
 * one to its CPU's value. The sum over CPUs is exact only if no two
 * processes ever run on one CPU slot at once. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} calls SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int on_getppid(void *ctx)
{
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&calls, &zero);

	if (v) {
		__u64 n = *v;
		/* Widen the window between the read and the write: helper
		 * calls the compiler cannot drop. */
		__u64 t = 0;
#pragma unroll
		for (int i = 0; i < 8; i++)
			t += bpf_ktime_get_ns() & 1;
		*v = n + 1 + (t & 0);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
