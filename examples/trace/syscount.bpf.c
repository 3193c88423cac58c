// syscount: how many times the traced process made each system call
// (libbpf-tools' syscount, counting only). Key: syscall number; value:
// calls. Attached to the raw sys_enter tracepoint, whose second argument
// is the syscall number.
//
// Built with -DRAW_SYSCALLS_TP (syscount_tp.o) it attaches as
// libbpf-tools' syscount and bpftrace's one-liners do: to the
// raw_syscalls:sys_enter and raw_syscalls:sys_exit tracepoints, whose
// records carry the number (`id`) and the arguments or the result (`ret`),
// and counts failed calls per number too (syscount --failures).
#include "trace.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

/* One more for `id` in `map`. */
static __always_inline void count(void *map, __u32 id)
{
	__u64 one = 1, *n;

	n = bpf_map_lookup_elem(map, &id);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	/* First call of this number: another thread may insert it at the same
	 * time, so insert only if absent and count on whichever entry won. */
	if (bpf_map_update_elem(map, &id, &one, BPF_NOEXIST) == 0)
		return;
	n = bpf_map_lookup_elem(map, &id);
	if (n)
		__sync_fetch_and_add(n, 1);
}

#ifdef RAW_SYSCALLS_TP
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} failures SEC(".maps");

SEC("tracepoint/raw_syscalls/sys_enter")
int syscount_enter(struct trace_event_raw_sys_enter *args)
{
	if (traced())
		count(&counts, (__u32)args->id);
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int syscount_exit(struct trace_event_raw_sys_exit *args)
{
	if (traced() && args->ret < 0)
		count(&failures, (__u32)args->id);
	return 0;
}
#else
SEC("raw_tracepoint/sys_enter")
int syscount_enter(struct bpf_raw_tracepoint_args *ctx)
{
	if (traced())
		count(&counts, (__u32)ctx->args[1]);
	return 0;
}
#endif

char LICENSE[] SEC("license") = "GPL";
