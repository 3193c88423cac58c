/* Follows `exec` through a traced process tree, as execsnoop does: the
 * entry of execve/execveat remembers the file by thread in `pending`; the
 * exit, which the kernel fires in the new image (or in the old one when
 * the call failed), sends the file, result, system-call number and the
 * comm it finds as one perf-buffer sample and deletes the entry. (The
 * kernel returns a successful execveat through sys_exit_execve, with 59.)
 * counts[0] execve entries, [1] execveat entries, [2] exits with 0,
 * [3] failed exits, [4] exits without an entry.
 * Only tasks under the cgroup in slot 0 of `cgroup_filter` count (the
 * kernel oracle puts the command in a cgroup of its own). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "counts.h"

/* The syscalls tracepoints' records: a 4-byte `__syscall_nr` (the 4
 * bytes after it are padding, not part of the record's fields). */
struct sys_enter_ctx {
	__u64 common;
	int nr;
	int pad;
	unsigned long args[6];
};

struct sys_exit_ctx {
	__u64 common;
	int nr;
	int pad;
	long ret;
};

struct exec_event {
	__u32 tid;
	__s32 ret;
	__s32 nr;
	__u32 pad;
	char comm[16];
	char file[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct exec_event);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_filter SEC(".maps");

static __always_inline int remember(const char *file, __u32 slot)
{
	if (!bpf_current_task_under_cgroup(&cgroup_filter, 0))
		return 0;
	struct exec_event e = {};
	__u32 tid = bpf_get_current_pid_tgid();

	e.tid = tid;
	bpf_probe_read_user_str(e.file, sizeof(e.file), file);
	bpf_map_update_elem(&pending, &tid, &e, BPF_ANY);
	bump(slot, 1);
	return 0;
}

static __always_inline int returned(struct sys_exit_ctx *ctx)
{
	if (!bpf_current_task_under_cgroup(&cgroup_filter, 0))
		return 0;
	__u32 tid = bpf_get_current_pid_tgid();
	struct exec_event *e = bpf_map_lookup_elem(&pending, &tid);

	if (!e) {
		bump(4, 1);
		return 0;
	}
	e->ret = ctx->ret;
	e->nr = ctx->nr;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, e, sizeof(*e));
	bpf_map_delete_elem(&pending, &tid);
	bump(ctx->ret == 0 ? 2 : 3, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_execve")
int on_execve(struct sys_enter_ctx *ctx)
{
	return remember((const char *)ctx->args[0], 0);
}

SEC("tracepoint/syscalls/sys_enter_execveat")
int on_execveat(struct sys_enter_ctx *ctx)
{
	return remember((const char *)ctx->args[1], 1);
}

SEC("tracepoint/syscalls/sys_exit_execve")
int on_execve_exit(struct sys_exit_ctx *ctx)
{
	return returned(ctx);
}

SEC("tracepoint/syscalls/sys_exit_execveat")
int on_execveat_exit(struct sys_exit_ctx *ctx)
{
	return returned(ctx);
}

char LICENSE[] SEC("license") = "GPL";
