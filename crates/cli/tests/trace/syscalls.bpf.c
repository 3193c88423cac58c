/* System-call tracepoints on the test target's writes to fd 77. Slots of
 * `counts`: 0 sys_enter_write on fd 77, 1 matching sys_exit_write,
 * 2 their summed results, 3 raw sys_enter of write (the target writes only
 * to fd 77), 4 raw sys_exit returning 7. With the kernel, `target_tgid` (set by
 * the loader) keeps other processes out. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <asm/unistd.h>
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;

struct sys_enter_ctx {
	__u64 common;
	long id;
	unsigned long args[6];
};

struct sys_exit_ctx {
	__u64 common;
	long id;
	long ret;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

/* Threads inside a write to fd 77 (sys_exit has no arguments). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} in_write SEC(".maps");

static __always_inline int ours(void)
{
	return !target_tgid || (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline void bump(__u32 slot, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);
	if (v)
		__sync_fetch_and_add(v, by);
}

SEC("tracepoint/syscalls/sys_enter_write")
int enter_write(struct sys_enter_ctx *ctx)
{
	if (!ours() || ctx->args[0] != 77)
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), one = 1;
	bpf_map_update_elem(&in_write, &tid, &one, BPF_ANY);
	bump(0, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_write")
int exit_write(struct sys_exit_ctx *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	if (!ours() || !bpf_map_lookup_elem(&in_write, &tid))
		return 0;
	bpf_map_delete_elem(&in_write, &tid);
	bump(1, 1);
	bump(2, ctx->ret);
	return 0;
}

SEC("raw_tracepoint/sys_enter")
int raw_enter(struct bpf_raw_tracepoint_args *ctx)
{
	if (ours() && ctx->args[1] == __NR_write)
		bump(3, 1);
	return 0;
}

/* The raw sys_exit has (regs, ret) only; the target's only calls that
 * return 7 are its 7-byte writes. */
SEC("raw_tracepoint/sys_exit")
int raw_exit(struct bpf_raw_tracepoint_args *ctx)
{
	if (ours() && ctx->args[1] == 7)
		bump(4, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
