/* A sys_enter_write/sys_exit_write pair (a hand-off map keyed by thread,
 * which `--fuse compile` would compile into one function) and a
 * ksyscall/write program on the same call: the pair must not be compiled
 * (its hook would run instead of the call's), and every program must run.
 * Slots: 0 writes to fd 77 entered (pair), 1 those the exit matched,
 * 2 writes to fd 77 seen by ksyscall/write. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "counts.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} fds SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_write")
int enter_write(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 fd = ctx->args[0];

	if (fd != 77)
		return 0;
	bpf_map_update_elem(&fds, &tid, &fd, BPF_ANY);
	bump(0, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_write")
int exit_write(struct trace_event_raw_sys_exit *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (!bpf_map_lookup_elem(&fds, &tid))
		return 0;
	bpf_map_delete_elem(&fds, &tid);
	bump(1, 1);
	return 0;
}

SEC("ksyscall/write")
int BPF_KSYSCALL(ks_write, int fd)
{
	if (fd == 77)
		bump(2, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
