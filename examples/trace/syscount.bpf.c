// syscount: how many times the traced process made each system call
// (libbpf-tools' syscount, counting only). Key: syscall number; value:
// calls. Attached to the raw sys_enter tracepoint, whose second argument
// is the syscall number.
#include "trace.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

SEC("raw_tracepoint/sys_enter")
int syscount_enter(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 id = (__u32)ctx->args[1];
	__u64 one = 1, *n;

	if (!traced())
		return 0;
	n = bpf_map_lookup_elem(&counts, &id);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return 0;
	}
	/* First call of this number: another thread may insert it at the same
	 * time, so insert only if absent and count on whichever entry won. */
	if (bpf_map_update_elem(&counts, &id, &one, BPF_NOEXIST) == 0)
		return 0;
	n = bpf_map_lookup_elem(&counts, &id);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
