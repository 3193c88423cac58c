/* System calls of application signal handlers that interrupt a blocked
 * traced call (tests/trace/sigblock_target.c). Slots of `counts`:
 * 0 sys_enter_getppid, 1 sys_exit_getppid, 2 sys_enter_write on fd 78
 * (the handlers' writes), 3 sys_enter_rt_sigreturn, 4 sys_enter_read on
 * fds 80-83 (the blocked reads and their restarts), 5 sys_enter_getegid
 * (after a siglongjmp out of a handler), 6 uprobe on the target's
 * handler_mark (called by each SIGUSR1/SIGHUP run: a probe hit inside a
 * handler that interrupted a call in flight). With the kernel, `target_tgid`
 * (set by the loader) keeps other processes out. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;

struct sys_enter_ctx {
	__u64 common;
	long id;
	unsigned long args[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline int ours(void)
{
	return !target_tgid || (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline void bump(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);
	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int enter_getppid(void *ctx)
{
	if (ours())
		bump(0);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_getppid")
int exit_getppid(void *ctx)
{
	if (ours())
		bump(1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_write")
int enter_write(struct sys_enter_ctx *ctx)
{
	if (ours() && ctx->args[0] == 78)
		bump(2);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_rt_sigreturn")
int enter_sigreturn(void *ctx)
{
	if (ours())
		bump(3);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_read")
int enter_read(struct sys_enter_ctx *ctx)
{
	if (ours() && ctx->args[0] >= 80 && ctx->args[0] <= 83)
		bump(4);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getegid")
int enter_getegid(void *ctx)
{
	if (ours())
		bump(5);
	return 0;
}

SEC("uprobe/" TARGET_EXE ":handler_mark")
int on_handler_mark(void *ctx)
{
	if (ours())
		bump(6);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
