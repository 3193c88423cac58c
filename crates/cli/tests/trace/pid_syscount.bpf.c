/* System calls of tests/trace/pid_sys_target.c, syscount-style, for
 * `bpfjet trace --pid` and the kernel (tests/trace/kernel_loader.c, which
 * sets target_tgid). Slots of `counts`: 0 write enters on fd 100, 1 read
 * enters on fd 101, 2 getpid enters, 3 getpid exits returning the traced
 * process's id, 4 read exits of 1 byte on fd 101 (paired through the
 * per-thread map `reading`). `by_nr` counts every system call entered,
 * by number (raw_tracepoint/sys_enter). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 512);
	__type(key, __u64);
	__type(value, __u64);
} by_nr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} reading SEC(".maps");

struct enter_ctx {
	__u64 common;
	long id;
	unsigned long args[6];
};

struct exit_ctx {
	__u64 common;
	long id;
	long ret;
};

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

SEC("tracepoint/syscalls/sys_enter_write")
int enter_write(struct enter_ctx *ctx)
{
	if (ours() && ctx->args[0] == 100)
		bump(0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_read")
int enter_read(struct enter_ctx *ctx)
{
	__u64 tid = bpf_get_current_pid_tgid(), one = 1;
	if (ours() && ctx->args[0] == 101) {
		bump(1);
		bpf_map_update_elem(&reading, &tid, &one, BPF_ANY);
	}
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_read")
int exit_read(struct exit_ctx *ctx)
{
	__u64 tid = bpf_get_current_pid_tgid();
	if (!ours() || !bpf_map_lookup_elem(&reading, &tid))
		return 0;
	bpf_map_delete_elem(&reading, &tid);
	if (ctx->ret == 1)
		bump(4);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getpid")
int enter_getpid(struct enter_ctx *ctx)
{
	if (ours())
		bump(2);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_getpid")
int exit_getpid(struct exit_ctx *ctx)
{
	if (ours() && ctx->ret == (long)(bpf_get_current_pid_tgid() >> 32))
		bump(3);
	return 0;
}

SEC("raw_tracepoint/sys_enter")
int any_enter(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 nr = ctx->args[1], one = 1;
	__u64 *v;
	if (!ours())
		return 0;
	v = bpf_map_lookup_elem(&by_nr, &nr);
	if (!v && !bpf_map_update_elem(&by_nr, &nr, &one, BPF_NOEXIST))
		return 0;
	/* Present, or another thread inserted it meanwhile. */
	v = bpf_map_lookup_elem(&by_nr, &nr);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
